#!/usr/bin/env python3
"""Generates the tokenizer parity fixtures under tests/data/tokenizer/.

Trains a small Gemma-style byte-fallback BPE with HuggingFace `tokenizers` and records what HF
produces for a few hundred test strings, so tests/tokenizer/parity_test.cc can check that our C++
encoder and decoder agree id for id and byte for byte.

Corpus: the King James Version of the Bible (translated 1611; public domain) from Debian's
`bible-kjv-text` package (`apt-get install bible-kjv-text`), dumped with
`bible -f 'Gen1:1-Rev22:21'`. KJV is plain ASCII, so a short multilingual / code supplement
written for this script is mixed in to give the vocabulary some non-ASCII pieces and merges.

The tokenizer is gemma_bpe.py's (Gemma-4 special tokens at their real ids, "\\n" = 107, byte
fallback, GemmaConverter's pipeline), plus a few added tokens only these tests use.

Invalid UTF-8: the C++ API takes raw bytes and replaces every maximal ill-formed subsequence with
U+FFFD, exactly what Python's bytes.decode("utf-8", "replace") does. Cases with "input_hex" hold
raw bytes; HF sees the Python-decoded string.

Also writes kjv_sample.txt (the first 256 KiB of the corpus) for bench/tokenizer/encode_bench.cc.

Also (optional) --tiny: encodes ~50 strings with the C++-generated tiny tokenizer
(tests/data/tokenizer/tiny_tokenizer.json, written by tests/tokenizer/tiny_tokenizer_test.cc with
GANNET_UPDATE_FIXTURES=1) and writes tiny_expected.json.

Usage:
  /opt/golden-venv/bin/python tools/tokenizer/make_parity_data.py [--corpus kjv.txt] [--tiny]
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers

from gemma_bpe import SPECIALS, build_tokenizer, train

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT_DIR = os.path.join(REPO, "tests", "data", "tokenizer")

TARGET_VOCAB = 8000

# Written for this script (not from any source) so the vocabulary learns some non-ASCII pieces.
SUPPLEMENT = """\
東京は日本の首都です。日本語の文章を少し書きます。私は本を読みます。
中文的句子在这里。我们今天去公园散步，天气很好。你好，世界！
한국어 문장도 조금 있습니다. 오늘은 날씨가 좋습니다.
Привет, мир! Это короткий текст на русском языке для словаря.
Γειά σου κόσμε. Αυτό είναι ένα μικρό κείμενο.
Café, naïve, résumé, façade, jalapeño, Zürich, Ångström, smørrebrød.
שלום עולם, זה טקסט קצר בעברית.
مرحبا بالعالم، هذا نص قصير باللغة العربية.
नमस्ते दुनिया, यह एक छोटा पाठ है।
def main(argv):\n    return 0 if argv else 1
for (int i = 0; i < n; ++i) { sum += values[i]; }
{"key": "value", "numbers": [1, 2, 3], "nested": {"ok": true}}
The quick brown fox jumps over the lazy dog 0123456789 times.
"""


def load_corpus(path):
    if path:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
    else:
        raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                             text=True).stdout
    lines = [re.sub(r"^\S+\d+:\d+ ", "", line) for line in raw.splitlines() if line.strip()]
    return lines + SUPPLEMENT.splitlines() * 20


def build_parity_tokenizer(trained_vocab, trained_merges):
    tok = build_tokenizer(trained_vocab, trained_merges)
    # Extra added tokens that exercise lstrip/rstrip and normalized matching (ids past the vocab).
    tok.add_tokens([AddedToken("<|strip_me|>", special=False, normalized=False, lstrip=True,
                               rstrip=True),
                    AddedToken("New York", special=False, normalized=True),
                    AddedToken("Selah", special=False, normalized=False, single_word=True)])
    tok.add_special_tokens([AddedToken("<|img|>", special=True, normalized=False, lstrip=True)])
    return tok


def hand_strings():
    s = [
        "", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\t \t\n \u00a0",
        "\u3000", "\u2028", "a", "A", "hello", "Hello world", " leading", "trailing ",
        "  both  ", "multiple   spaces   here", "tab\tseparated\tvalues", "line1\nline2\n",
        "\n\nparagraph\n\n\n", "    indented code", "a  b   c    d     e",
        "In the beginning God created the heaven and the earth.",
        "And God said, Let there be light: and there was light.",
        "Jesus wept.", "The LORD is my shepherd; I shall not want.",
        "AND THE EARTH WAS WITHOUT FORM", "beginning beginning beginning",
        "unbelievable unbelievingly", "thee thou thy thine",
        "日本語のテキスト", "中文测试：你好，世界！", "한국어 텍스트", "Привет, мир!",
        "Ελληνικά", "עברית מימין לשמאל", "العربية من اليمين", "abc עברית 123 def",
        "\u202eRTL override\u202c", "नमस्ते", "สวัสดีครับ", "வணக்கம்", "გამარჯობა", "Ողջույն",
        "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇯🇵🇺🇸", "I ❤️ NY", "e\u0301", "a\u0308\u0304",
        "Z\u0351\u0364\u0363a\u0336\u0321l\u0316g\u0354o\u0355", "ﬁ ﬂ", "Å vs A\u030a",
        "zero\u200bwidth", "\ufeffBOM start", "\U0001F600 text", "∑∫√∞ ≠ ≤ ≥", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "\u0000", "nul\u0000inside", "\x01\x02\x7f", "\ufffd", "bad\ufffdchar", "\ue000",
        "\uffff", "\U0010ffff", "Café naïve résumé", "Zürich Ångström", "smørrebrød",
        "def main(argv):\n    return 0 if argv else 1\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += values[i];\n}",
        '{"key": "value", "list": [1, 2, 3], "nested": {"ok": true}}',
        '<div class="x">Hello &amp; welcome</div>', "# Title\n\n* item one\n* item two\n",
        "```python\nprint('hi')\n```", r"^\s*(\d+)\.(\d+)$", "ls -la | grep foo > out.txt 2>&1",
        "https://example.com/path?query=1&b=2#frag", "user.name+tag@example.org",
        "3.14159 2,000,000 1e-9 -42 +7", "0x1F 0b1010 0o777", "2026-11-21T14:38:00Z",
        "<bos>hello", "hello<eos>", "<|turn>user\nHi<turn|>\n<|turn>model\n",
        "<start_of_turn>user", "<|turn><|turn>", "<|tur", "<|turn", "<<|turn>>", "<pad><pad>",
        "<unused6>", "<unused60", "<unused6>>", "<mask>", '<|"|>quoted<|"|>',
        '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>', "<|think|>",
        "<|channel>thought\nabc<channel|>answer", " <bos> ", "<bos > no", "<BOS>", "<0x41>",
        "<0xZZ>", "x <|strip_me|> y", "x<|strip_me|>y", "  <|strip_me|>  ", "a \n<|strip_me|>\t\nb",
        "I love New York", "New  York", "NewYork", "New York New York", "new york",
        "Selah", "Selah.", "xSelah", "Selahx", "Selah_", "éSelah", "Selah日", "(Selah)",
        "Selahx Selah", "pic: <|img|> done", "pic:    <|img|>", "<|img|><|img|>",
        "<eos><bos><pad><unk>",
        "<|turn>system\n<|think|>\nBe brief.<turn|>\n",
        "a" * 500, "supercalifragilisticexpialidocious" * 10, "abcdefghijklmnopqrstuvwxyz" * 20,
        "1234567890" * 30, " " * 100, "\n" * 50, "\t" * 17, "日本" * 100, "😀" * 60,
        "the " * 150, "antidisestablishmentarianism",
        "Pneumonoultramicroscopicsilicovolcanoconiosis",
        "x" + "\u0301" * 30, "A\u00a0B\u2009C\u202fD", "mixed 日本 and English 123 😀 ok",
    ]
    return s


# Raw byte inputs (hex) for the invalid-UTF-8 rule.
INVALID_HEX = [
    "ff", "c0af", "e282", "e28241", "f09f98", "f09f9880", "eda080", "f4908080", "80", "bf", "fe",
    "61ff62", "c3", "e08080", "f0808080", "c241", "e228a1", "f888808080", "3c626f733eff",
    "68656c6c6fe282ac", "e282ac20e282", "f09f", "cdb8", "ed9fbf", "efbfbd", "20ff20ff20",
    "3c7c7475726eff3e",
]

UNICODE_POOLS = [
    (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
    (0x600, 0x6FF), (0x900, 0x97F), (0x300, 0x36F), (0x3040, 0x30FF), (0x4E00, 0x4FFF),
    (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0x2000, 0x206F), (0xE000, 0xE010),
]


def random_strings(rng, lines, n):
    words = " ".join(lines[:4000]).split()
    specials = list(SPECIALS.values()) + ["<unused7>", "<|strip_me|>", "New York", "\n", "\t"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.random()
            if kind < 0.45:
                parts.append(rng.choice(words))
            elif kind < 0.75:
                lo, hi = rng.choice(UNICODE_POOLS)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 5))))
            elif kind < 0.9:
                parts.append(rng.choice([" ", "  ", "\n", "\t", " \n", "\u00a0", "   "]))
            else:
                parts.append(rng.choice(specials))
            if rng.random() < 0.6:
                parts.append(" ")
        out.append("".join(parts))
    return out


def encode_case(tok, text):
    ids = tok.encode(text, add_special_tokens=False).ids
    with_special = tok.encode(text, add_special_tokens=True).ids
    assert with_special[len(with_special) - len(ids):] == ids, text
    return {
        "ids": ids,
        "special_prefix": with_special[: len(with_special) - len(ids)],
        "decoded": tok.decode(ids, skip_special_tokens=False),
        "decoded_skip": tok.decode(ids, skip_special_tokens=True),
    }


def decode_cases(tok, rng):
    v = tok.get_vocab()
    byte = lambda b: v[f"<0x{b:02X}>"]
    targeted = [
        [byte(0xE2), byte(0x82), byte(0xAC)],
        [byte(0xE2), byte(0x82), v["a"]],
        [byte(0x41), byte(0xFF), v["b"]],
        [byte(0xF0), byte(0x9F), byte(0x98), byte(0x80)],
        [v["▁"], byte(0xF0), byte(0x9F), v["<bos>"], byte(0x98), byte(0x80)],
        [byte(0xF0), byte(0x9F), v["<unused7>"], byte(0x98), byte(0x80)],
        [v["<bos>"], v["▁"], v["a"]], [v["▁▁"], v["\n"], v["\t"]],
        [byte(0xC3)], [byte(0x80)], [], [v["<pad>"], v["<eos>"], v["<|turn>"]],
    ]
    ids_pool = list(range(tok.get_vocab_size()))
    byte_ids = [byte(b) for b in range(256)]
    utf8_byte_ids = [byte(b) for b in "é€😀日".encode("utf-8")]
    out = []
    for ids in targeted:
        out.append(ids)
    for _ in range(60):
        ids = []
        for _ in range(rng.randint(1, 20)):
            r = rng.random()
            if r < 0.3:
                ids.append(rng.choice(byte_ids))
            elif r < 0.5:
                ids.append(rng.choice(utf8_byte_ids))
            elif r < 0.6:
                ids.append(rng.choice(list(SPECIALS)))
            else:
                ids.append(rng.choice(ids_pool))
        out.append(ids)
    return [{"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
             "decoded_skip": tok.decode(ids, skip_special_tokens=True)} for ids in out]


def variants(base_json):
    """Tokenizers built from the same vocab with other pipeline pieces, as JSON overrides."""
    def piece(setter):
        tok = Tokenizer.from_str(base_json)
        setter(tok)
        return json.loads(tok.to_str())

    llama = piece(lambda t: (
        setattr(t, "normalizer", normalizers.Sequence([normalizers.Prepend("▁"),
                                                       normalizers.Replace(" ", "▁")])),
        setattr(t, "pre_tokenizer", None),
        setattr(t, "decoder", decoders.Sequence([decoders.Replace("▁", " "),
                                                 decoders.ByteFallback(), decoders.Fuse(),
                                                 decoders.Strip(" ", 1, 0)]))))
    splits = piece(lambda t: (
        setattr(t, "normalizer", normalizers.Sequence([normalizers.Strip(left=True, right=True),
                                                       normalizers.Replace(" ", "▁")])),
        setattr(t, "pre_tokenizer", pre_tokenizers.Sequence([
            pre_tokenizers.Split("▁", "merged_with_next"),
            pre_tokenizers.Split("\n", "isolated"),
            pre_tokenizers.Split("!", "removed"),
            pre_tokenizers.Split("ee", "contiguous"),
            pre_tokenizers.Split(",", "merged_with_previous", invert=True)])),
        setattr(t, "decoder", decoders.Sequence([decoders.Replace("▁", " "),
                                                 decoders.ByteFallback(), decoders.Fuse(),
                                                 decoders.Strip("x", 2, 1)]))))
    out = {
        "llama_style": {k: llama[k] for k in ("normalizer", "pre_tokenizer", "decoder")},
        "splits": {k: splits[k] for k in ("normalizer", "pre_tokenizer", "decoder")},
        "ignore_merges": {"model": {"ignore_merges": True}},
        "unk_fused": {"model": {"byte_fallback": False, "fuse_unk": True}},
        "unk_unfused": {"model": {"byte_fallback": False, "fuse_unk": False}},
    }
    return out


def apply_overrides(base, overrides):
    d = json.loads(base)
    for k, v in overrides.items():
        if k == "model":
            d["model"].update(v)
        else:
            d[k] = v
    return Tokenizer.from_str(json.dumps(d, ensure_ascii=False))


def safe_decode(tok, ids):
    """HF's Strip decoder panics when a token is shorter than `stop`; record that as null."""
    try:
        return tok.decode(ids, skip_special_tokens=False)
    except BaseException:  # pyo3 PanicException derives from BaseException
        return None


def input_of(case):
    if "input_hex" in case:
        return bytes.fromhex(case["input_hex"]).decode("utf-8", "replace")
    return case["input"]


def make_tiny_expected(rng):
    path = os.path.join(OUT_DIR, "tiny_tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tok = Tokenizer.from_str(f.read())
    strings = [
        "", "The quick brown fox jumps over the lazy dog.", "the then there this that",
        "In the beginning God created the heaven and the earth.", "  spaced  out  ",
        "<|turn>user\nHello there!<turn|>\n<|turn>model\n", "<bos>text<eos>", "tab\there",
        "Café 日本 😀", "reading writing singing and ending", "Mixed CASE Words HERE",
        "numbers 0123456789", "<|think|>", '<|"|>x<|"|>', "\n\n\n", "on an in at it is",
        "information station nation", "the theory of everything", "    indented", "a\u0301",
    ]
    strings += random_strings(rng, ["the cat sat on the mat and then the dog ran"], 30)
    cases = []
    for s in strings:
        c = {"input": s}
        c.update(encode_case(tok, s))
        cases.append(c)
    with open(os.path.join(OUT_DIR, "tiny_expected.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/tokenizer/make_parity_data.py --tiny", "cases": cases}, f,
                  ensure_ascii=False, indent=0)
    print(f"tiny: {len(cases)} cases")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", help="KJV text as printed by `bible -f`; default: run bible")
    ap.add_argument("--tiny", action="store_true", help="only write tiny_expected.json")
    args = ap.parse_args()
    rng = random.Random(20261121)
    if args.tiny:
        make_tiny_expected(rng)
        return
    lines = load_corpus(args.corpus)
    trained_vocab, trained_merges = train(lines, TARGET_VOCAB)
    tok = build_parity_tokenizer(trained_vocab, trained_merges)
    base_json = tok.to_str()
    tok = Tokenizer.from_str(base_json)
    print(f"vocab {tok.get_vocab_size()} merges {len(json.loads(base_json)['model']['merges'])}")

    cases = [{"input": s} for s in hand_strings()]
    cases += [{"input": s} for s in rng.sample(lines[:31000], 60)]
    cases += [{"input": s} for s in random_strings(rng, lines, 110)]
    cases += [{"input_hex": h} for h in INVALID_HEX]
    for c in cases:
        c.update(encode_case(tok, input_of(c)))

    variant_out = {}
    for name, overrides in variants(base_json).items():
        vtok = apply_overrides(base_json, overrides)
        results = []
        for i, c in enumerate(cases):
            if i % 2 == 0 or "input_hex" in c:
                ids = vtok.encode(input_of(c), add_special_tokens=False).ids
                results.append({"case": i, "ids": ids, "decoded": safe_decode(vtok, ids)})
        variant_out[name] = {"overrides": overrides, "results": results}

    expected = {
        "generator": "tools/tokenizer/make_parity_data.py",
        "tokenizers_version": __import__("tokenizers").__version__,
        "cases": cases,
        "decode_cases": decode_cases(tok, rng),
        "variants": variant_out,
    }
    # Benchmark text for bench/tokenizer/encode_bench.cc: the first 256 KiB of the corpus.
    sample, size = [], 0
    for line in lines:
        if size + len(line) + 1 > 256 * 1024:
            break
        sample.append(line)
        size += len(line.encode("utf-8")) + 1
    with open(os.path.join(OUT_DIR, "kjv_sample.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(sample) + "\n")
    with open(os.path.join(OUT_DIR, "parity_tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(json.loads(base_json), ensure_ascii=False, separators=(",", ":")))
    with open(os.path.join(OUT_DIR, "parity_expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))
    print(f"{len(cases)} cases, {len(expected['decode_cases'])} decode cases")


if __name__ == "__main__":
    sys.exit(main())
