#!/usr/bin/env bash
# `make format` and `make format-check`: clang-format over the tracked C, C++ and CUDA sources
# (git ls-files: nothing untracked, nothing under build/) with the repository's .clang-format.
#   tools/format.sh          rewrites the files that differ, in place
#   tools/format.sh --check  lists the files that differ and fails (CI); changes nothing
# The version is pinned to clang-format 14 (Debian 12's clang-format-14, 14.0.6; tools/
# install_deps.sh installs it): other major versions format some constructs differently, so CI
# and developers would disagree. CLANG_FORMAT=<binary> picks another binary of that version.
set -euo pipefail
cd "$(dirname "$0")/.."
want=14

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: tools/format.sh [--check]" >&2; exit 2 ;;
esac

bin=${CLANG_FORMAT:-}
if [ -z "$bin" ]; then
  bin=clang-format-$want
  command -v "$bin" > /dev/null || bin=clang-format
fi
if ! command -v "$bin" > /dev/null; then
  echo "format: $bin not found; install Debian's clang-format-$want" \
       "(tools/install_deps.sh as root, or: sudo apt-get install -y clang-format-$want)" >&2
  exit 1
fi
version=$("$bin" --version | head -1)
major=$(sed -n 's/.*clang-format version \([0-9][0-9]*\)\..*/\1/p' <<< "$version")
if [ "$major" != "$want" ]; then
  echo "format: $bin is '$version', but the tree is formatted with clang-format $want" \
       "(Debian 12's clang-format-$want): other major versions format differently. Install" \
       "clang-format-$want, or point CLANG_FORMAT at a clang-format $want binary." >&2
  exit 1
fi

mapfile -t files < <(git ls-files -- '*.c' '*.h' '*.cc' '*.cu' '*.cuh')
if [ "${#files[@]}" -eq 0 ]; then
  echo "format: no tracked sources (is this a git checkout?)" >&2
  exit 1
fi
jobs=$(nproc)

if [ "$check" -eq 0 ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" "$bin" -i --style=file
  echo "format: ${#files[@]} files formatted with $bin ($major)"
  exit 0
fi

# One line per file whose formatted text differs from the file.
mapfile -t bad < <(printf '%s\0' "${files[@]}" | xargs -0 -n 16 -P "$jobs" sh -c '
  for f; do "$0" --style=file "$f" | cmp -s - "$f" || echo "$f"; done' "$bin" | sort)
if [ "${#bad[@]}" -eq 0 ]; then
  echo "format-check: ${#files[@]} files formatted ($bin $major)"
  exit 0
fi
echo "format-check: ${#bad[@]} of ${#files[@]} files are not formatted ($bin $major):"
printf '  %s\n' "${bad[@]}"
echo "run 'make format' (or: git clang-format-$want for the lines you changed) and commit"
exit 1
