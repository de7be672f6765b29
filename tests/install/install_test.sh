#!/usr/bin/env bash
# Installs gannet into a temporary prefix and checks the layout, the exported symbols and the
# archive, then builds examples/c/minimal.c against the installed tree four ways (pkg-config and
# find_package(gannet), each with the shared and the static library) and runs each program on a
# tiny model: all must print what the installed CLI prints.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1 src=$2
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

run() {  # run NAME BINARY: it must print what the CLI printed
  "$2" "$tiny" "$prompt" 16 > "$tmp/$1.out" 2> "$tmp/$1.err" && cmp -s "$tmp/expected" "$tmp/$1.out"
  local rc=$?
  [ $rc -eq 0 ] || { cat "$tmp/$1.err"; diff "$tmp/expected" "$tmp/$1.out" | head -5; }
  check "$1 prints what the CLI prints" $rc
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
  $cc -std=c99 -Wall -Wextra -pedantic -Werror "$minimal" -o "$tmp/pc_shared" \
    $(pkg-config --cflags --libs gannet) -Wl,-rpath,"$libdir"
  check "pkg-config gannet: build" $?
  needs_libgannet "$tmp/pc_shared"; check "pkg-config gannet: links libgannet.so" $?
  run pc_shared "$tmp/pc_shared"
  # shellcheck disable=SC2046
  $cc -std=c99 -Wall -Wextra -pedantic -Werror "$minimal" -o "$tmp/pc_static" \
    $(pkg-config --cflags --libs gannet-static)
  check "pkg-config gannet-static: build" $?
  ! needs_libgannet "$tmp/pc_static"; check "pkg-config gannet-static: no libgannet.so needed" $?
  run pc_static "$tmp/pc_static"
else
  echo "skip the pkg-config builds: pkg-config is not installed"
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
