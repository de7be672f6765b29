//! Lets this crate's example and tests find libgannet.so at run time without LD_LIBRARY_PATH:
//! gannet-sys reports the folder it linked against (DEP_GANNET_LIB_DIR, from its `links` key),
//! and it becomes the run path of this package's binaries (not of the library itself: a
//! program that depends on this crate picks its own run path or installs libgannet).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_GANNET_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_GANNET_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
