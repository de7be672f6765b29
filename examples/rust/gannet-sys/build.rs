//! Finds libgannet.so without any network access or helper crates, in this order:
//! 1. `GANNET_LIB_DIR` (CMake sets it when it builds the Rust example),
//! 2. `pkg-config --variable=libdir gannet` (an installed gannet, see `gannet.pc`),
//! 3. the repository's own CMake build trees (`build/*/lib/capi`), the newest library first.
//!
//! The folder is passed on to dependent crates as `DEP_GANNET_LIB_DIR` (the `links` key), so a
//! crate with binaries can add it to their run path. This crate's own tests get it as their run
//! path. Link arguments do not reach the binaries of other crates, so the library is also linked
//! through links to it under OUT_DIR: cargo puts link folders inside its target folder on the
//! loader's path of `cargo run` and `cargo test`, so those start the binaries of any crate that
//! depends on this one without LD_LIBRARY_PATH.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const LIB_FILE: &str = "libgannet.so";

fn from_env() -> Option<PathBuf> {
    let dir = PathBuf::from(env::var_os("GANNET_LIB_DIR")?);
    if !dir.join(LIB_FILE).exists() {
        panic!(
            "GANNET_LIB_DIR={} has no {LIB_FILE}; build the `gannet` CMake target first",
            dir.display()
        );
    }
    Some(dir)
}

fn from_pkg_config() -> Option<PathBuf> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "gannet"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    dir.join(LIB_FILE).exists().then_some(dir)
}

fn from_build_tree() -> Option<PathBuf> {
    // examples/rust/gannet-sys -> the repository root.
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let build = manifest.ancestors().nth(3)?.join("build");
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(&build).ok()?.flatten() {
        let dir = entry.path().join("lib").join("capi");
        let Ok(modified) = dir.join(LIB_FILE).metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if best.as_ref().map_or(true, |(t, _)| modified > *t) {
            best = Some((modified, dir));
        }
    }
    best.map(|(_, dir)| dir)
}

/// OUT_DIR/lib with a symbolic link to every `libgannet.so*` of `dir` (the file the linker reads
/// and the soname the loader looks for).
fn link_folder(dir: &std::path::Path) -> PathBuf {
    let links = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("lib");
    let _ = std::fs::remove_dir_all(&links);
    std::fs::create_dir_all(&links).expect("cannot create OUT_DIR/lib");
    for entry in std::fs::read_dir(dir).expect("cannot list the library folder").flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(LIB_FILE) {
            std::os::unix::fs::symlink(entry.path(), links.join(&name))
                .expect("cannot link the library into OUT_DIR/lib");
        }
    }
    links
}

fn main() {
    println!("cargo:rerun-if-env-changed=GANNET_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    // Relinking is not needed when libgannet.so is rebuilt (its ABI is stable); only a change of
    // where it lives (the variables above) or of this script reruns the search.
    println!("cargo:rerun-if-changed=build.rs");
    let dir = from_env()
        .or_else(from_pkg_config)
        .or_else(from_build_tree)
        .unwrap_or_else(|| {
            panic!(
                "cannot find {LIB_FILE}: set GANNET_LIB_DIR to the folder that holds it, install \
                 gannet where pkg-config finds gannet.pc, or build it with CMake under build/"
            )
        });
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("cargo:rustc-link-search=native={}", link_folder(&dir).display());
    println!("cargo:rustc-link-lib=dylib=gannet");
    // This crate's own tests call into the library: give them the run path (dependents get
    // the folder through DEP_GANNET_LIB_DIR and choose their own).
    println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}
