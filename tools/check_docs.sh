#!/usr/bin/env bash
# Documentation checks (run by .ci/run; no build needed, a few seconds):
#  1. ARCHITECTURE.md stays a map: at most 15 KB (details belong in a note under docs/).
#  2. Every *.md path named in a tracked non-Markdown file (code comments, scripts, CMake) exists,
#     relative to the repository root or to the naming file's folder.
#  3. Every Markdown link [text](target) to a local file resolves from the linking file, and
#     every repository path of a Markdown file written in one (under docs/, bench/, ...) exists.
#  4. Every "§N" or "§N.M" reference to the Gemma-4 model description ($model below) names one
#     of its sections (a heading "## N." / "### N.M", or item M of the numbered list under
#     "## N.").
# Prints each broken reference as file:line and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
report() { echo "check_docs: $*" >&2; fail=1; }

limit=$((15 * 1024))
size=$(wc -c < ARCHITECTURE.md)
if (( size > limit )); then
  report "ARCHITECTURE.md is $size bytes, over the map's $limit: move details into a note under docs/"
fi

exists_from() {  # exists_from <naming file> <reference>
  local ref=${2%%#*}
  [[ -e $ref ]] || [[ -e $(dirname "$1")/$ref ]]
}

# 2. *.md paths in tracked non-Markdown text files (grep -I skips binary files).
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
  [[ $ref == *://* ]] && continue  # a URL, not a repository file
  [[ $ref == *'$'* ]] && continue  # a path built from a variable ($src/README.md), not a name
  exists_from "$file" "$ref" || report "$file:$line: names $ref, which does not exist"
done < <(git ls-files -z -- ':!:*.md' | xargs -0 grep -nIoE '[A-Za-z0-9_./:${}-]*[A-Za-z0-9_-]\.md\b' || true)

# 3. Links and repository paths in Markdown files.
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; link=${rest#*:}
  target=${link#](}; target=${target%)}; target=${target%%#*}
  [[ -z $target || $target == *://* || $target == mailto:* ]] && continue
  [[ -e $(dirname "$file")/$target ]] || report "$file:$line: links to $target, which does not exist"
done < <(git ls-files -z -- '*.md' | xargs -0 grep -noE '\]\([^) ]+\)' || true)
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
  [[ -e $ref ]] || report "$file:$line: names $ref, which does not exist"
done < <(git ls-files -z -- '*.md' |
         xargs -0 grep -noE '(^|[^A-Za-z0-9_./(-])(docs|bench|tools|lib|kernels|tests|examples|include|cmake)/[A-Za-z0-9_./-]*\.md\b' |
         sed -E 's/^([^:]*:[0-9]+:)[^a-z]?/\1/' || true)

# 4. Section references into the model description.
model=docs/gemma4-model.md
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; sec=${rest##*§}
  major=${sec%%.*}; minor=${sec#"$major"}; minor=${minor#.}
  if [[ -z $minor ]]; then
    grep -qE "^## $major\. " "$model" && continue
  else
    grep -qE "^### $major\.$minor " "$model" && continue
    # Item <minor> of the numbered list in section <major> (e.g. §7.16, the 16th trap).
    awk -v maj="$major" -v min="$minor" '
      /^## / { in_sec = ($2 == maj ".") }
      in_sec && $1 == min "." { found = 1 }
      END { exit !found }' "$model" && continue
  fi
  report "$file:$line: cites $model §$sec, which has no such section"
done < <(git ls-files -z | xargs -0 grep -nIoE 'gemma4-model\.md §[0-9]+(\.[0-9]+)?' || true)

if (( fail )); then
  echo "check_docs: FAILED" >&2
  exit 1
fi
echo "check_docs: ARCHITECTURE.md $size bytes (limit $limit); every document reference resolves"
