#!/usr/bin/env bash
# The README's quick start and "Using it" examples, run as written: every line of the ```sh
# blocks of those two sections (joined where a line ends in a backslash) runs in one bash session
# at the repository root, so a line may use what an earlier one exported; each must exit 0. The
# one line not run is `make test`: it is what runs this test. The ```c program of "Using it" is
# compiled against the library of this build and must print text and nothing on stderr. The
# extraction knows only the section titles and the fences, so a line added to the README is
# tested without a change here.
# usage: readme_test.sh SOURCE_DIR LIB_DIR   (LIB_DIR holds this build's libgannet.so)
set -uo pipefail
src=$1 libdir=$2
readme=$src/README.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# blocks LANG: the lines of the ```LANG blocks inside the sections "## Quick start" and
# "## Using it", a block's end marked by a line "@@end".
blocks() {
  awk -v lang="$1" '
    /^## / { in_section = ($0 == "## Quick start" || $0 == "## Using it") }
    in_section && !in_block && $0 == "```" lang { in_block = 1; next }
    in_block && $0 == "```" { in_block = 0; print "@@end"; next }
    in_block { print }
  ' "$readme"
}

blocks sh | grep -v '^@@end$' | awk '
  { line = (pending == "" ? $0 : pending "\n" $0) }
  /\\$/ { pending = line; next }
  { print line; pending = "" }
' > "$tmp/lines"
# Comments after a command stay (bash ignores them); blank and comment-only lines are dropped.
grep -v -e '^[[:space:]]*$' -e '^[[:space:]]*#' "$tmp/lines" > "$tmp/commands" || true
count=$(wc -l < "$tmp/commands")
if [ "$count" -lt 3 ]; then
  echo "FAIL: found $count command lines in the README's quick start and Using it sections"
  exit 1
fi

# One bash session runs them all, each line announced, its status checked.
{
  echo 'failures=0'
  echo "cd \"$src\""
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    if [[ $line =~ ^make\ test([[:space:]]|$) ]]; then
      echo "echo 'skip: make test (it runs this test)'"
      continue
    fi
    echo "echo \"\$ \$(sed -n ${n}p '$tmp/commands')\""
    echo "$line"
    echo "rc=\$?; [ \$rc -eq 0 ] || { echo \"FAIL (exit \$rc): \$(sed -n ${n}p '$tmp/commands')\"; failures=\$((failures + 1)); }"
  done < "$tmp/commands"
  echo 'exit $failures'
} > "$tmp/run.sh"
# An outer make (make test) leaves its jobserver in MAKEFLAGS; `make demo` here is a make of its own.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL bash "$tmp/run.sh" < /dev/null
failures=$?

# The C program.
blocks c | sed '/^@@end$/q' | grep -v '^@@end$' > "$tmp/readme.c"
if [ ! -s "$tmp/readme.c" ]; then
  echo "FAIL: no \`\`\`c block in the README's Using it section"
  failures=$((failures + 1))
else
  echo "\$ cc -std=c99 readme.c -lgannet && ./readme   (the README's C program)"
  if ${CC:-cc} -std=c99 -Wall -Werror -I"$src/include" "$tmp/readme.c" -o "$tmp/readme" \
       -L"$libdir" -Wl,-rpath,"$libdir" -lgannet; then
    (cd "$src" && env -u GANNET_LOG_LEVEL "$tmp/readme") > "$tmp/c.out" 2> "$tmp/c.err"
    rc=$?
    cat "$tmp/c.out"
    if [ $rc -ne 0 ] || [ ! -s "$tmp/c.out" ] || [ -s "$tmp/c.err" ]; then
      echo "FAIL: the README's C program (exit $rc; stdout and stderr above and here):"
      cat "$tmp/c.err"
      failures=$((failures + 1))
    fi
  else
    echo "FAIL: the README's C program does not compile"
    failures=$((failures + 1))
  fi
fi

if [ "$failures" -ne 0 ]; then echo "$failures README example(s) failed"; exit 1; fi
echo "every README example ran"
