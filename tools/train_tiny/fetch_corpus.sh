#!/usr/bin/env bash
# Fetches the public-domain English corpus the tiny Gemma-4 is trained on, from Debian packages:
#   kjv.txt  King James Version (1611), package bible-kjv-text, printed by bible-kjv's `bible`
#   web.txt  World English Bible (2020 stable text, with the deuterocanon), package
#            sword-text-web (SWORD module engWEB2015eb, "PUBLIC DOMAIN" in its .conf), printed by
#            diatheke
# as plain prose: one verse per line, a blank line between chapters, no references, Strong's
# numbers, footnotes or headings. Revelation (both translations) is held out: it goes only to
# heldout_kjv.txt / heldout_web.txt. SOURCES.txt records the .deb versions and sha256s.
#
# Nothing is installed: the .debs are fetched with `apt-get download` (cached in OUTDIR/debs) and
# unpacked with `dpkg -x` into a temporary root; the programs run from there. Same packages, same
# output: rerunning rewrites identical files (about 5 s).
#
# Usage: tools/train_tiny/fetch_corpus.sh OUTDIR
set -euo pipefail
OUT=${1:?usage: fetch_corpus.sh OUTDIR}
mkdir -p "$OUT/debs"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The programs, the texts, and libsword's libraries the machine lacks (libclucene is not part of
# a base system; the others usually are).
pkgs=(bible-kjv bible-kjv-text diatheke libsword1.9.0 libsword-common sword-text-web)
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in libclucene-core1v5 libicu72 libcurl3-gnutls libbz2-1.0 liblzma5 zlib1g libreadline8; do
  have "$p" || pkgs+=("$p")
done
missing=()
for p in "${pkgs[@]}"; do ls "$OUT/debs/${p}_"*.deb > /dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  [ -n "$(find /var/lib/apt/lists -name '*Packages*' 2>/dev/null | head -1)" ] || apt-get update -qq
  # Sandbox user root: the download folder need not be writable by _apt.
  (cd "$OUT/debs" && apt-get download -qq -o APT::Sandbox::User=root "${missing[@]}")
fi
for p in "${pkgs[@]}"; do dpkg -x "$(ls "$OUT/debs/${p}_"*.deb | tail -1)" "$TMP/root"; done
(cd "$OUT/debs" && for p in "${pkgs[@]}"; do
   f=$(ls "${p}_"*.deb | tail -1); echo "$f $(sha256sum "$f" | cut -d' ' -f1)"; done) \
  > "$OUT/SOURCES.txt"

R=$TMP/root
export LD_LIBRARY_PATH=$R/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# -p: where bible.data lives; -f: one "Gen1:1 text" line per verse.
"$R/usr/bin/bible" -p "$R/usr/lib" -f 'Gen1:1-Rev22:21' > "$TMP/kjv.raw"
# -o f keeps the footnotes as <note> elements so the cleaner can put back the space the module
# lacks around some of them ("God<note/>created"); -f internal is the module's OSIS, one verse a
# line (diatheke's "plain" breaks poetry over lines and repeats psalm titles).
SWORD_PATH=$R/usr/share/sword "$R/usr/bin/diatheke" -b engWEB2015eb -o f -f internal \
  -k 'Gen 1:1-Rev 22:21' > "$TMP/web.raw"

python3 - "$TMP" "$OUT" <<'EOF'
import re, sys
tmp, out = sys.argv[1:]

def kjv():
    for line in open(f"{tmp}/kjv.raw", encoding="utf-8"):
        m = re.match(r"(\d?[A-Za-z]+)(\d+):\d+ (.*)$", line.rstrip("\n"))
        assert m, line
        yield m[1], m[2], m[3]

def web():
    for line in open(f"{tmp}/web.raw", encoding="utf-8"):
        # diatheke repeats the last psalm title (and its tags) before later verses of a range.
        m = re.match(r"(?:<title.*?</title>(?:\s*<[^>]*>)*\s*)?([^<>:]+?) (\d+):\d+: (.*)$",
                     line.rstrip("\n"))
        if not m:
            assert line.strip() in ("", "(engWEB2015eb)"), line
            continue
        t = re.sub(r'<div[^>]*type="glossary".*', "", m[3])  # the glossary after Rev 22:21
        t = re.sub(r"<(title|speaker)\b.*?</\1>", "", t)        # headings, speaker labels
        t = re.sub(r"<note\b.*?</note>", "\0", t)
        t = re.sub(r"<[^>]*>", "", t)                            # <w savlm="strong:..">, <l>, ...
        t = re.sub(r"(\S)\0(?=[\w“‘(])", r"\1 ", t).replace("\0", "")
        yield m[1], m[2], " ".join(t.split())

for name, verses, heldout in (("kjv", kjv(), "Rev"), ("web", web(), "Revelation of John")):
    files = {False: open(f"{out}/{name}.txt", "w", encoding="utf-8"),
             True: open(f"{out}/heldout_{name}.txt", "w", encoding="utf-8")}
    last = {False: None, True: None}
    for book, chapter, text in verses:
        if not text:
            continue
        h = book == heldout
        if last[h] not in (None, (book, chapter)):
            files[h].write("\n")
        last[h] = (book, chapter)
        files[h].write(text + "\n")
    for f in files.values():
        f.close()
EOF

cd "$OUT"
for f in kjv.txt web.txt heldout_kjv.txt heldout_web.txt; do
  printf '%-16s %9d bytes %6d lines\n' "$f" "$(wc -c < "$f")" "$(wc -l < "$f")"
done
