#!/usr/bin/env bash
# Installs gannet into a temporary prefix and checks the layout, the exported symbols and the
# archive, then follows the README's recipes against the installed tree: examples/c/minimal.c
# four ways (pkg-config and find_package(gannet), each with the shared and the static library),
# the Go example through `#cgo pkg-config: gannet`, and a Rust crate of a user's own
# (tests/install/rust_app) through pkg-config, and runs each program on a tiny model without
# LD_LIBRARY_PATH: all must print what the installed CLI prints. A recipe whose toolchain is
# missing (pkg-config, go, cargo) is skipped with a message.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tiny=$src/tests/data/tiny/e4b
prompt="Hello there, who are you?"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
failures=0
check() {  # check NAME EXIT-CODE
  if [ "$2" -eq 0 ]; then echo "ok   $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1
check "cmake --install" $? || true
pc_dir=$(dirname "$(find "$prefix" -name gannet.pc | head -n 1)")
libdir=$(dirname "$pc_dir")
[ -f "$prefix/include/gannet/gannet.h" ] && [ -f "$libdir/libgannet.a" ] &&
  [ -f "$libdir/pkgconfig/gannet-static.pc" ] && [ -f "$libdir/cmake/gannet/gannetConfig.cmake" ] &&
  [ -x "$prefix/bin/gannet" ]
check "layout: header, archive, pkg-config files, CMake package, CLI" $?
# Before 1.0 a minor version may break the ABI: the soname carries it.
[ -L "$libdir/libgannet.so" ] && [ -L "$libdir/libgannet.so.0.2" ] &&
  [ "$(readelf -d "$libdir/libgannet.so" | grep -o 'SONAME.*')" = "SONAME)             Library soname: [libgannet.so.0.2]" ]
check "libgannet.so is versioned (soname libgannet.so.0.2)" $?

nm -D --defined-only "$libdir/libgannet.so" | awk '{print $NF}' > "$tmp/exports"
grep -qx gannet_engine_create "$tmp/exports" && ! grep -v '^gannet_' "$tmp/exports"
check "libgannet.so exports gannet_* only" $?
# The archive holds the whole engine: the C ABI and the engine's internals are defined in it.
nm -C --defined-only "$libdir/libgannet.a" 2> /dev/null > "$tmp/archive_syms"
grep -q ' T gannet_engine_create$' "$tmp/archive_syms" &&
  grep -q 'gannet::engine::Engine::Submit' "$tmp/archive_syms" &&
  grep -q 'gannet::tokenizer::' "$tmp/archive_syms" && grep -q 'gannet::backend::' "$tmp/archive_syms"
check "libgannet.a bundles the engine, tokenizer and backends" $?

"$prefix/bin/gannet" generate -m "$tiny" --chat -p "$prompt" -n 16 -q > "$tmp/expected" 2> "$tmp/cli.err"
check "the installed CLI runs" $?
[ -s "$tmp/expected" ] || { echo "FAIL the CLI printed nothing"; failures=$((failures + 1)); }

# The programs must start as a user starts them: no LD_LIBRARY_PATH, the run path comes from the
# installed pkg-config and CMake files.
unset LD_LIBRARY_PATH
run() {  # run NAME BINARY [ARGS...]: it must print what the CLI printed
  local name=$1 binary=$2
  shift 2
  [ $# -gt 0 ] || set -- "$tiny" "$prompt" 16
  "$binary" "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" && cmp -s "$tmp/expected" "$tmp/$name.out"
  local rc=$?
  [ $rc -eq 0 ] || { cat "$tmp/$name.err"; diff "$tmp/expected" "$tmp/$name.out" | head -5; }
  check "$name prints what the CLI prints" $rc
}
needs_libgannet() { readelf -d "$1" | grep -q 'NEEDED.*libgannet'; }

cc=${CC:-cc}
minimal=$src/examples/c/minimal.c
if command -v pkg-config > /dev/null; then
  export PKG_CONFIG_PATH=$pc_dir
  # The shared library carries its C++ dependencies: gannet.pc requires no other .pc file (a C
  # program builds where abseil's and fmt's are absent); gannet-static.pc requires them.
  [ -z "$(pkg-config --print-requires --print-requires-private gannet)" ] &&
    ! grep -q -- '-labsl\|-lfmt' "$pc_dir/gannet.pc"
  check "gannet.pc requires nothing" $?
  # shellcheck disable=SC2046  # pkg-config output is a list of flags
  # The README's line as written: gannet.pc carries the run path, so no -Wl,-rpath here.
  $cc -std=c99 -Wall -Wextra -pedantic -Werror "$minimal" -o "$tmp/pc_shared" \
    $(pkg-config --cflags --libs gannet)
  check "pkg-config gannet: build" $?
  needs_libgannet "$tmp/pc_shared"; check "pkg-config gannet: links libgannet.so" $?
  run pc_shared "$tmp/pc_shared"
  # shellcheck disable=SC2046
  $cc -std=c99 -Wall -Wextra -pedantic -Werror "$minimal" -o "$tmp/pc_static" \
    $(pkg-config --cflags --libs gannet-static)
  check "pkg-config gannet-static: build" $?
  ! needs_libgannet "$tmp/pc_static"; check "pkg-config gannet-static: no libgannet.so needed" $?
  run pc_static "$tmp/pc_static"
  # Every library the archive uses must be named by gannet-static.pc (NCCL in CUDA builds).
  if nm "$libdir/libgannet.a" 2> /dev/null | grep -q ' U ncclCommInitRank$'; then
    pkg-config --libs gannet-static | grep -q -- '-lnccl'
    check "gannet-static.pc links NCCL, which libgannet.a uses" $?
  fi

  if command -v go > /dev/null; then
    # examples/go as a user builds it: the default build tags take `#cgo pkg-config: gannet`.
    # A fresh build cache: a cached package keeps the -L folder pkg-config gave when it was
    # built, and an earlier run's prefix is gone.
    (cd "$src/examples/go" && env GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" \
       GOFLAGS= GOPROXY=off GOTOOLCHAIN=local GO111MODULE=on CGO_ENABLED=1 \
       go build -o "$tmp/go_generate" ./cmd/generate) > "$tmp/go.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || cat "$tmp/go.log"
    check "go build through pkg-config gannet" $rc
    needs_libgannet "$tmp/go_generate"; check "the Go program links libgannet.so" $?
    run go_pkgconfig "$tmp/go_generate" -m "$tiny" --chat -p "$prompt" -n 16
  else
    echo "skip the Go recipe: go is not installed"
  fi

  cargo=$(command -v cargo || echo "${CARGO_HOME:-$HOME/.cargo}/bin/cargo")
  if [ -x "$cargo" ]; then
    # A crate of a user's own, depending on the `gannet` crate; gannet-sys finds the installed
    # library through pkg-config (GANNET_LIB_DIR unset, no build tree searched: a copy of the
    # crates outside the repository).
    mkdir -p "$tmp/rust"
    cp -r "$src/examples/rust" "$tmp/rust/examples-rust"
    rm -rf "$tmp/rust/examples-rust/target"
    mkdir -p "$tmp/rust/app"
    cp -r "$src/tests/install/rust_app/src" "$src/tests/install/rust_app/Cargo.lock" "$tmp/rust/app/"
    sed 's|path = "../../../examples/rust/gannet"|path = "../examples-rust/gannet"|' \
      "$src/tests/install/rust_app/Cargo.toml" > "$tmp/rust/app/Cargo.toml"
    (cd "$tmp/rust/app" && env -u GANNET_LIB_DIR CARGO_TARGET_DIR="$tmp/rust/target" \
       "$cargo" build --offline --locked --quiet) > "$tmp/cargo.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || cat "$tmp/cargo.log"
    check "cargo build of a crate of one's own through pkg-config gannet" $rc
    # `cargo run` starts it as is; a binary started directly needs the run path, which the
    # crate's README gives through RUSTFLAGS (link arguments of a dependency do not reach it).
    (cd "$tmp/rust/app" && env -u GANNET_LIB_DIR CARGO_TARGET_DIR="$tmp/rust/target" \
       "$cargo" run --offline --locked --quiet -- "$tiny" "$prompt" 16) > "$tmp/rust_run.out" \
       2> "$tmp/rust_run.err" && cmp -s "$tmp/expected" "$tmp/rust_run.out"
    rc=$?
    [ $rc -eq 0 ] || { cat "$tmp/rust_run.err"; diff "$tmp/expected" "$tmp/rust_run.out" | head -5; }
    check "cargo run of a crate of one's own prints what the CLI prints" $rc
    (cd "$tmp/rust/app" && env -u GANNET_LIB_DIR CARGO_TARGET_DIR="$tmp/rust/target-rpath" \
       RUSTFLAGS="-C link-arg=-Wl,-rpath,$(pkg-config --variable=libdir gannet)" \
       "$cargo" build --offline --locked --quiet) > "$tmp/cargo_rpath.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || cat "$tmp/cargo_rpath.log"
    check "cargo build with the README's RUSTFLAGS run path" $rc
    run rust_pkgconfig "$tmp/rust/target-rpath/debug/gannet-install-app"
  else
    echo "skip the Rust recipe: cargo is not installed"
  fi
else
  echo "skip the pkg-config builds (C, Go, Rust): pkg-config is not installed"
fi

cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DMINIMAL_SOURCE="$minimal" > "$tmp/consumer.log" 2>&1 &&
  cmake --build "$tmp/consumer" >> "$tmp/consumer.log" 2>&1
rc=$?
[ $rc -eq 0 ] || cat "$tmp/consumer.log"
check "find_package(gannet COMPONENTS static): build" $rc
needs_libgannet "$tmp/consumer/minimal_shared"; check "gannet::gannet links libgannet.so" $?
! needs_libgannet "$tmp/consumer/minimal_static"; check "gannet::gannet_static: no libgannet.so needed" $?
run cmake_shared "$tmp/consumer/minimal_shared"
run cmake_static "$tmp/consumer/minimal_static"

# A plain `cmake -S . -B build` (the default generator, no preset) must configure, CUDA or not.
cmake -S "$src" -B "$tmp/plain" -DGANNET_BUILD_BENCH=OFF > "$tmp/plain.log" 2>&1
rc=$?
[ $rc -eq 0 ] || tail -20 "$tmp/plain.log"
check "cmake -S . -B build with the default generator configures" $rc

if [ "$failures" -ne 0 ]; then echo "$failures install check(s) failed"; exit 1; fi
echo "all install checks passed"
