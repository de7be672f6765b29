#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from tests/data.

The seeds are committed; rerun this only to change them (it replaces the folders it writes).
Each target's input format is described at the top of its .cc file; the seeds here follow it:

  safetensors_fuzz    the header of every tiny checkpoint file (and of a one-file copy of the
                      sharded 31B) plus 16 data bytes, and small hand-made files for each check
  config_fuzz         the tiny config.json files, text-only and broken variants, "dummy:" names
  tokenizer_fuzz      the tiny tokenizer.json, a small hand-written one and broken variants of it;
                      sample texts; id lists
  chat_template_fuzz  one seed per distinct conversation of tests/data/tokenizer/
                      chat_template_expected.json, with its options
  request_fuzz        requests in request_fuzz.cc's compact format
  api_request_fuzz    OpenAI request bodies of gannet serve (chat and completions), valid and not
  jinja_template_fuzz the tiny checkpoints' chat templates and small templates for each construct
  tool_calls_fuzz     the model outputs of tests/data/chat_corpus/model_outputs.json, markers as
                      bytes 1-3
  image_decode_fuzz   the test images of tests/data/images up to 16 KB (PNG, JPEG, WebP)

Usage: tests/fuzz/make_corpus.py   (from anywhere; stdlib only)
"""

import hashlib
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
TINY = ["31b", "26b-a4b", "e4b", "e2b", "31b-assistant", "26b-a4b-assistant", "e4b-assistant",
        "e2b-assistant"]


def write_corpus(target, seeds):
    """seeds: list of (name, bytes). Names are kept short and readable."""
    d = os.path.join(OUT, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    seen = set()
    for name, data in seeds:
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        digest = hashlib.sha1(data).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def jdump(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# ---- safetensors_fuzz -------------------------------------------------------------------------

def st_file(header, data=b""):
    h = header if isinstance(header, bytes) else jdump(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, f.read(n)


def safetensors_seeds():
    seeds = []
    for v in TINY:
        d = os.path.join(DATA, "tiny", v)
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".safetensors"):
                n, h = read_header(os.path.join(d, fn))
                with open(os.path.join(d, fn), "rb") as f:
                    f.seek(8 + n)
                    seeds.append((f"tiny-{v}-{fn.replace('.safetensors', '')}",
                                  struct.pack("<Q", n) + h + f.read(16)))
    # The sharded 31B as one file (header only): the one seed that binds as the tiny 31B.
    merged, offset = {}, 0
    for fn in ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]:
        _, h = read_header(os.path.join(DATA, "tiny", "31b", fn))
        for name, e in json.loads(h).items():
            if name == "__metadata__":
                merged[name] = e
                continue
            size = e["data_offsets"][1] - e["data_offsets"][0]
            merged[name] = {"dtype": e["dtype"], "shape": e["shape"],
                            "data_offsets": [offset, offset + size]}
            offset += size
    seeds.append(("tiny-31b-merged", st_file(merged)))
    n, h = read_header(os.path.join(DATA, "golden", "e2b.safetensors"))
    seeds.append(("golden-e2b", struct.pack("<Q", n) + h))
    # Small files, one per check of the reader.
    t = lambda dt, shape, b, e: {"dtype": dt, "shape": shape, "data_offsets": [b, e]}
    seeds += [
        ("empty", b""),
        ("short", b"\x02\x00\x00\x00\x00\x00\x00"),
        ("len-past-end", struct.pack("<Q", 1 << 40) + b"{}"),
        ("empty-object", st_file({})),
        ("not-object", st_file([1, 2])),
        ("bad-json", st_file(b'{"a": ')),
        ("metadata", st_file({"__metadata__": {"format": "pt"}})),
        ("metadata-not-string", st_file({"__metadata__": {"format": 1}})),
        ("one-f32", st_file({"x": t("F32", [2, 2], 0, 16)}, bytes(16))),
        ("all-dtypes", st_file({
            "a": t("BF16", [2], 0, 4), "b": t("F16", [2], 4, 8), "c": t("F32", [1], 8, 12),
            "d": t("F64", [1], 12, 20), "e": t("I64", [1], 20, 28), "f": t("I32", [1], 28, 32),
            "g": t("I16", [1], 32, 34), "h": t("I8", [1], 34, 35), "i": t("U8", [1], 35, 36),
            "j": t("BOOL", [1], 36, 37), "k": t("F8_E4M3", [1], 37, 38)}, bytes(38))),
        ("unknown-dtype", st_file({"x": t("Q4", [2], 0, 1)}, bytes(1))),
        ("overlap", st_file({"a": t("F32", [2], 0, 8), "b": t("F32", [1], 4, 8)}, bytes(8))),
        ("gap", st_file({"a": t("F32", [1], 4, 8)}, bytes(8))),
        ("size-mismatch", st_file({"a": t("F32", [3], 0, 8)}, bytes(8))),
        ("shape-overflow", st_file({"a": t("F32", [1 << 62, 1 << 62], 0, 8)}, bytes(8))),
        ("negative-dim", st_file({"a": t("F32", [-1], 0, 4)}, bytes(4))),
        ("scalar", st_file({"a": t("F32", [], 0, 4)}, bytes(4))),
        ("zero-size", st_file({"a": t("F32", [0, 3], 0, 0)})),
        ("tower", st_file({"model.vision_tower.w": t("BF16", [2], 0, 4),
                           "model.language_model.norm.weight": t("BF16", [2], 4, 8)}, bytes(8))),
    ]
    return seeds


# ---- config_fuzz ------------------------------------------------------------------------------

def config_seeds():
    seeds = []
    configs = {}
    for v in TINY:
        with open(os.path.join(DATA, "tiny", v, "config.json"), "rb") as f:
            raw = f.read()
        seeds.append((f"tiny-{v}", raw))
        configs[v] = json.loads(raw)
    # Text-only shape of a wrapper config: the text config itself, model_type gemma4_text.
    for v in ["31b", "26b-a4b", "e4b", "e2b"]:
        c = configs[v]
        if "text_config" in c:
            text = dict(c["text_config"])
            text["model_type"] = "gemma4_text"
            seeds.append((f"text-only-{v}", jdump(text)))
    big = configs["31b"]["text_config"] if "text_config" in configs["31b"] else configs["31b"]
    full = big["layer_types"].index("full_attention")
    plc = {str(full): {"head_dim": big.get("global_head_dim", 512),
                       "num_key_value_heads": big.get("num_global_key_value_heads") or 1},
           "0": {"head_dim": big.get("head_dim", 256)}}
    seeds.append(("per-layer-config", jdump(dict(configs["31b"], text_config=dict(
        big, per_layer_config=plc)) if "text_config" in configs["31b"] else dict(
        big, per_layer_config=plc))))
    def with_text(cfg, **changes):  # changes the decoder's fields, wrapped or not
        cfg = json.loads(jdump(cfg))
        (cfg["text_config"] if "text_config" in cfg else cfg).update(changes)
        return jdump(cfg)

    e2b = configs["e2b"]  # text-only (gemma4_text)
    seeds.append(("wrapped-e2b", jdump({"model_type": "gemma4", "text_config": e2b})))
    seeds.append(("huge-layers", with_text(e2b, num_hidden_layers=2147483647)))
    seeds.append(("layer-types-short", with_text(e2b, layer_types=e2b["layer_types"][:1])))
    seeds.append(("kv-shared-all", with_text(e2b, num_kv_shared_layers=e2b["num_hidden_layers"])))
    # Every count and size at the largest the parser accepts (CheckBounds): derived sizes and
    # CountParameters must not overflow. Too big for a generated checkpoint.
    moe = json.loads(jdump(configs["26b-a4b"]))
    moe["text_config"].update(
        vocab_size=1 << 24, hidden_size=1 << 17, intermediate_size=1 << 20, num_hidden_layers=1024,
        num_attention_heads=1024, num_key_value_heads=1024, num_global_key_value_heads=1024,
        head_dim=4096, global_head_dim=4096, num_experts=4096, top_k_experts=4096,
        moe_intermediate_size=1 << 20, max_position_embeddings=1 << 24, sliding_window=1 << 24,
        use_double_wide_mlp=True, vocab_size_per_layer_input=1 << 24,
        hidden_size_per_layer_input=1 << 17, num_kv_shared_layers=1000)
    del moe["text_config"]["layer_types"]  # absent: HF's 5:1 pattern, last layer full
    seeds.append(("max-bounds", jdump(moe)))
    seeds += [
        ("empty", b""),
        ("empty-object", b"{}"),
        ("minimal-text", jdump({"model_type": "gemma4_text"})),
        ("unknown-type", jdump({"model_type": "llama"})),
        ("not-object", b"[]"),
        ("dummy-31b", b"dummy:31b"),
        ("dummy-26b-a4b", b"dummy:26b-a4b"),
        ("dummy-e4b", b"dummy:e4b"),
        ("dummy-e2b-assistant", b"dummy:e2b-assistant"),
        ("dummy-unknown", b"dummy:7b"),
    ]
    return seeds


# ---- tokenizer_fuzz ---------------------------------------------------------------------------

SMALL_TOKENIZER = {
    "version": "1.0",
    "added_tokens": [
        {"id": 0, "content": "<pad>", "special": True, "normalized": False},
        {"id": 1, "content": "<eos>", "special": True, "normalized": False},
        {"id": 2, "content": "<bos>", "special": True, "normalized": False},
        {"id": 3, "content": "<unk>", "special": True, "normalized": False}],
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                      "behavior": "MergedWithPrevious", "invert": False},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
    "model": {"type": "BPE", "byte_fallback": False, "unk_token": "<unk>", "fuse_unk": True,
              "vocab": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "a": 4, "b": 5, "c": 6,
                        "ab": 7, "abc": 8, "bc": 9, "\u2581": 10},
              "merges": ["a b", "ab c", "b c"]},
}

TEXTS = [
    ("hello", "Hello, world!"),
    ("sentence", "The quick brown fox jumps over the lazy dog.\n"),
    ("spaces", "  leading and trailing  \t\n  "),
    ("accents", "caf\u00e9 na\u00efve \u00fcber \u00c5ngstr\u00f6m"),
    ("cjk", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4"),
    ("emoji", "\U0001F600\U0001F680 \u20ac100 \U0001F1FA\U0001F1F8"),
    ("special", "<bos><|turn>user\nHi<turn|>\n<|turn>model\n<eos><unused6>[multimodal]"),
    ("markers", "<|channel>thought\nplan<channel|>answer <|think|>"),
    ("invalid-utf8", b"ab\xff\xfe c\xc3 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf"),
    ("control", b"\x00\x01\x02\x1b[0m\x7f"),
    ("lower-one-eighth", "\u2581already\u2581marked"),
    ("repeat", "ing ation the " * 40),
    ("code", "def f(x):\n    return x ** 2  # square\n"),
]


def tokenizer_seeds():
    seeds = []
    with open(os.path.join(DATA, "tiny", "e4b", "tokenizer.json"), "rb") as f:
        tiny = f.read()
    seeds.append(("load-tiny", b"\x00" + tiny))
    seeds.append(("load-tiny-skip", b"\x08" + tiny))
    small = SMALL_TOKENIZER
    seeds.append(("load-small", b"\x00" + jdump(small).encode()))

    def variant(name, **changes):
        doc = json.loads(jdump(small))
        for path, value in changes.items():
            node = doc
            keys = path.split("__")
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value
        # After a NUL: the text to encode with it.
        seeds.append((f"load-{name}", b"\x00" + jdump(doc).encode() + b"\x00 ab cab  bca \xe2\x82\xac"))

    variant("byte-fallback", model__byte_fallback=True)
    variant("strip-decoder", decoder={"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})
    variant("strip-tail", decoder={"type": "Sequence", "decoders": [
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 0, "stop": 1}]})
    variant("no-normalizer", normalizer=None)
    variant("nfkc", normalizer={"type": "NFKC"})
    variant("regex", normalizer={"type": "Replace", "pattern": {"Regex": " +"}, "content": ""})
    variant("bytelevel", pre_tokenizer={"type": "ByteLevel"})
    variant("sideways", pre_tokenizer={"type": "Split", "pattern": {"String": " "},
                                       "behavior": "Sideways"})
    variant("bad-merge", model__merges=["a q"])
    variant("pair-merges", model__merges=[["a", "b"], ["ab", "c"]])
    variant("dropout", model__dropout=0.1)
    variant("unk-missing", model__unk_token="<nope>")
    variant("wordpiece", model={"type": "WordPiece", "vocab": {}})
    variant("no-post", post_processor=None)
    variant("llama-normalizer", normalizer={"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})
    variant("strip-normalizer", normalizer={"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})
    for behavior in ["Removed", "Isolated", "MergedWithNext", "Contiguous"]:
        variant(f"split-{behavior.lower()}", pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "b"}, "behavior": behavior,
             "invert": behavior == "Contiguous"},
            {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious"}]})
    variant("added-flags", added_tokens=small["added_tokens"] + [
        {"id": 11, "content": "ab", "special": False, "single_word": True, "normalized": True},
        {"id": 12, "content": " c", "special": True, "lstrip": True, "rstrip": True,
         "normalized": False}])
    variant("added-extra", added_tokens=small["added_tokens"] + [
        {"id": 11, "content": "<extra>", "special": False, "lstrip": True, "rstrip": True}])
    variant("added-gap", added_tokens=small["added_tokens"] + [{"id": 12, "content": "<x>"}])
    seeds += [("load-empty", b"\x00"), ("load-not-json", b"\x00{not json"),
              ("load-array", b"\x00[]")]
    for name, text in TEXTS:
        raw = text if isinstance(text, bytes) else text.encode()
        seeds.append((f"encode-{name}", b"\x01" + raw))
    seeds.append(("encode-bos-hello", b"\x05" + b"Hello, world!"))
    seeds.append(("encode-skip-special", b"\x09" + TEXTS[6][1].encode()))
    seeds.append(("encode-strip-hello", b"\x03" + b" Hello  world"))
    seeds.append(("encode-strip-emoji", b"\x0b" + TEXTS[5][1].encode()))
    u16 = lambda ids: b"".join(struct.pack("<H", i) for i in ids)
    seeds += [
        ("ids-small", b"\x02" + u16([2, 107, 364, 400, 401, 1, 106])),
        ("ids-bytes-euro", b"\x02" + u16([108 + 0xE2, 108 + 0x82, 108 + 0xAC, 364])),
        ("ids-broken-run", b"\x02" + u16([108 + 0xF0, 108 + 0x9F, 364, 108 + 0xFF])),
        ("ids-special-skip", b"\x0a" + u16([2, 105, 108 + 0xC3, 0, 108 + 0xA9, 106, 1])),
        ("ids-out-of-range", b"\x02" + u16([512, 513, 0xFF00, 0xFF01, 0xFF02, 0xFF03, 5])),
        ("ids-all-bytes", b"\x02" + u16(range(108, 364))),
    ]
    return seeds


# ---- chat_template_fuzz -----------------------------------------------------------------------

ROLE_CODES = {"system": "0", "developer": "1", "user": "2", "assistant": "3", "model": "4"}


def chat_input(messages, flags, literal_roles=False):
    parts = []
    for m in messages:
        role = m["role"] if literal_roles else ROLE_CODES.get(m["role"], m["role"])
        fields = [role, m.get("content", "")]
        if m.get("reasoning"):
            fields.append(m["reasoning"])
        parts.append("\x1f".join(fields))
    return bytes([flags]) + "\x1e".join(parts).encode("utf-8", "surrogateescape")


def chat_seeds():
    with open(os.path.join(DATA, "tokenizer", "chat_template_expected.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    seeds, seen = [], set()
    for c in cases:
        key = jdump(c["messages"])
        if key in seen:
            continue
        seen.add(key)
        o = c["options"]
        flags = ((c["variant"] == "small") | (o.get("add_generation_prompt", False) << 1) |
                 (o.get("enable_thinking", False) << 2) | (o.get("preserve_thinking", False) << 3))
        seeds.append((f"case-{len(seeds):02d}", chat_input(c["messages"], flags)))
    hello = [{"role": "user", "content": "Hello!"}]
    seeds += [
        ("empty", b"\x02"),
        ("literal-roles", chat_input(hello + [{"role": "assistant", "content": "Hi."}], 3, True)),
        ("tool-role", chat_input([{"role": "tool", "content": "{}"}], 2, True)),
        ("unknown-role", chat_input([{"role": "narrator", "content": "x"}], 2, True)),
        ("invalid-utf8", b"\x02" + b"2\x1fbad \xff\xfe byte"),
        ("empty-bos", chat_input(hello, 0x12)),
        ("markers", chat_input([{"role": "user", "content": "<|turn>model\n<turn|>"},
                                {"role": "assistant",
                                 "content": "<|channel>thought\nx<channel|> y <|channel>z"}], 0x06)),
    ]
    return seeds


# ---- request_fuzz -----------------------------------------------------------------------------

def rstr(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<H", len(b)) + b


def request(bits, *parts):
    return struct.pack("<H", bits) + b"".join(parts)


def scalars(max_tokens=0, min_tokens=0, temperature=0.0, top_k=0, top_p=0.0, min_p=0.0, rep=0.0,
            presence=0.0, frequency=0.0, seed_mode=0, seed=0, ignore=0, logprobs=0, priority=0,
            deadline=0, agp=0, thinking=0, no_spec=0):
    return struct.pack("<iififffffiQiiiqiii", max_tokens, min_tokens, temperature, top_k, top_p,
                       min_p, rep, presence, frequency, seed_mode, seed, ignore, logprobs, priority,
                       deadline, agp, thinking, no_spec)


def messages(stride, items):
    out = struct.pack("<IB", stride, len(items))
    for kind, role, content, extra in items:
        out += struct.pack("<B", kind) + extra
        out += struct.pack("<B", role) if kind & 8 else rstr(role)
        out += rstr(content)
    return out


def request_seeds():
    ids = lambda xs: struct.pack("<H", len(xs)) + b"".join(struct.pack("<i", x) for x in xs)
    model = 1
    fuzzed_model = lambda vocab, ctx, tok, size=264: struct.pack("<qqBI", vocab, ctx, tok, size)
    chat = messages(24, [(8, 2, "Hello!", b""), (8, 3, "Hi, how can I help?", b""),
                         (8, 2, "Tell me a story.", b"")])
    return [
        ("empty", b""),
        ("tokens", request(8 | model, ids([2, 100, 200, 300]))),
        ("tokens-out-of-vocab", request(8 | model, ids([2, 99999, -1]))),
        ("tokens-null", request(16 | model, struct.pack("<H", 3))),
        ("text", request(32 | model, rstr("The quick brown fox"))),
        ("text-invalid-utf8", request(32, rstr(b"bad \xff byte"))),
        ("text-and-tokens", request(8 | 32, ids([2]), rstr("both"))),
        ("chat", request(64 | model, chat)),
        ("chat-stride-40", request(64 | model, messages(40, [(8, 0, "Be brief.", b""),
                                                             (8, 2, "Hi", b"")]))),
        ("chat-stride-small", request(64, messages(16, [(8, 2, "Hi", b"")]))),
        ("chat-stride-mismatch", request(64, messages(24, [(8, 2, "Hi", b""),
                                                           (9, 3, "Yo", struct.pack("<I", 32))]))),
        ("chat-null-content", request(64, messages(24, [(12, 2, "", b"")]))),
        ("chat-raw-role", request(64 | model, messages(24, [(0, "narrator", "x", b"")]))),
        ("chat-null-array", request(128, struct.pack("<B", 2))),
        ("stop-ids", request(8 | 256 | model, ids([2, 5]), ids([1, 106, 50]))),
        ("stop-ids-null", request(8 | 512, ids([2]), struct.pack("<H", 2))),
        ("stop-strings", request(32 | 1024 | model, rstr("Once"),
                                 struct.pack("<B", 3) + b"\x00" + rstr("\n\n") + b"\x00" +
                                 rstr("THE END") + b"\x01" + rstr("x"))),
        ("stop-strings-null", request(32 | 2048, rstr("Once"), struct.pack("<B", 1))),
        ("sampling", request(8 | 4096 | model, ids([2, 3]),
                             scalars(max_tokens=16, min_tokens=4, temperature=0.7, top_k=40,
                                     top_p=0.95, min_p=0.05, rep=1.1, presence=0.5, frequency=0.5,
                                     seed_mode=1, seed=42, logprobs=5, priority=3, deadline=1000,
                                     agp=2, thinking=1, no_spec=1))),
        ("sampling-bad", request(8 | 4096, ids([2]),
                                 scalars(max_tokens=-1, min_tokens=9, temperature=-1.0, top_p=2.0,
                                         seed_mode=7, logprobs=99, no_spec=2))),
        ("struct-size-old", request(4 | 8 | model, struct.pack("<I", 48), ids([2, 3]))),
        ("struct-size-big", request(4 | 32, struct.pack("<I", 4096), rstr("hi"))),
        ("struct-size-zero", request(4 | 32, struct.pack("<I", 0), rstr("hi"))),
        ("model-facts", request(2 | 8 | 32 | model, fuzzed_model(4, 3, 0), ids([2, 3, 9]),
                                rstr("x"))),
        ("model-no-tokenizer", request(2 | 32 | 1024 | model, fuzzed_model(262144, 131072, 0),
                                       rstr("Hi"), struct.pack("<B", 1) + b"\x00" + rstr("."))),
    ]


# ---- api_request_fuzz -------------------------------------------------------------------------

def api_request_seeds():
    chat, completion = b"\x00", b"\x01"
    user = [{"role": "user", "content": "Hi"}]
    bodies = [
        ("chat-min", chat, {"messages": user}),
        ("chat-all", chat, {"model": "m", "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "developer", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": None}, {"role": "user", "content": "b"}],
            "max_tokens": 5, "max_completion_tokens": 6, "temperature": 0.7, "top_p": 0.9,
            "top_k": 40, "min_p": 0.05, "presence_penalty": 0.1, "frequency_penalty": 0.2,
            "repetition_penalty": 1.1, "seed": 7, "stop": ["\n", "END"], "n": 2,
            "logprobs": True, "top_logprobs": 3, "user": "u", "stream": True,
            "stream_options": {"include_usage": True}, "stop_token_ids": [106],
            "ignore_eos": False, "min_tokens": 1, "add_generation_prompt": True,
            "chat_template_kwargs": {"enable_thinking": False}, "tool_choice": "none",
            "response_format": {"type": "text"}, "logit_bias": {}}),
        ("chat-tool-role", chat, {"messages": [{"role": "tool", "content": "1"}]}),
        ("chat-image", chat, {"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "x"}}]}]}),
        ("chat-bad-types", chat, {"messages": user, "temperature": "1", "n": 1.5,
                                  "stop": [1]}),
        ("completion-text", completion, {"prompt": "Once upon a time", "max_tokens": 8,
                                         "echo": True, "logprobs": 2}),
        ("completion-ids", completion, {"prompt": [2, 100, 200], "seed": -1}),
        ("completion-batch", completion, {"prompt": ["a", [2, 3]], "n": 3, "best_of": 3}),
        ("completion-bad", completion, {"prompt": [[]], "suffix": "s"}),
    ]
    seeds = [(name, ep + jdump(body).encode()) for name, ep, body in bodies]
    seeds.append(("deep", chat + b'{"messages": ' + b"[" * 80))
    seeds.append(("not-json", completion + b"{prompt: 'x'}"))
    return seeds


def jinja_seeds():
    seeds = []
    for name in ("large", "small"):
        with open(os.path.join(ROOT, "tools", "make_tiny", f"chat_template_{name}.jinja"),
                  encoding="utf-8") as f:
            seeds.append(("gemma4-" + name, f.read()))
    with open(os.path.join(DATA, "tiny", "trained", "chat_template.jinja"), encoding="utf-8") as f:
        seeds.append(("trained", f.read()))
    small = {
        "loop": "{% for m in messages %}{{ loop.index }}{{ m.role | upper }}{% endfor %}",
        "macro": "{% macro f(a, b=1) %}{{ a ~ b }}{% endmacro %}{{ f('x', b=2) }}",
        "namespace": "{% set ns = namespace(n=0) %}{% for t in tools %}{% set ns.n = ns.n + 1 %}"
                     "{% endfor %}{{ ns.n }}",
        "filters": "{{ messages | length }}{{ tools[0] | tojson }}{{ (messages[0].content | trim)[1:5] }}"
                   "{{ tools | map(attribute='type') | join(',') }}{{ {'b': 1, 'a': 2} | dictsort }}",
        "tests": "{% if tools is defined and tools[0] is mapping and 'x' not in 'y' %}ok{% endif %}",
        "raise": "{{ raise_exception('no') }}",
        "whitespace": "  {%- if true -%}\n  a  {%+ if false %}b{% else %}c{% endif %}\n{# c #}"
                      "{% endif %}",
    }
    seeds += sorted(small.items())
    return seeds


def tool_call_seeds():
    with open(os.path.join(DATA, "chat_corpus", "model_outputs.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    seeds = []
    for k, c in enumerate(cases):
        out = (c["output"].replace("<|tool_call>", "\x01").replace("<tool_call|>", "\x02")
               .replace('<|"|>', "\x03"))
        seeds.append((c["name"], bytes([k % 8]) + out.encode("utf-8")))
    return seeds


# ---- image_decode_fuzz ------------------------------------------------------------------------

def image_seeds():
    d = os.path.join(DATA, "images")
    seeds = []
    for fn in sorted(os.listdir(d)):
        path = os.path.join(d, fn)
        if os.path.isfile(path) and fn.endswith((".png", ".jpg", ".webp")):
            data = open(path, "rb").read()
            if len(data) <= 16384:
                seeds.append((fn, data))
    return seeds


def main():
    write_corpus("safetensors_fuzz", safetensors_seeds())
    write_corpus("config_fuzz", config_seeds())
    write_corpus("tokenizer_fuzz", tokenizer_seeds())
    write_corpus("chat_template_fuzz", chat_seeds())
    write_corpus("request_fuzz", request_seeds())
    write_corpus("api_request_fuzz", api_request_seeds())
    write_corpus("jinja_template_fuzz", jinja_seeds())
    write_corpus("tool_calls_fuzz", tool_call_seeds())
    write_corpus("image_decode_fuzz", image_seeds())
    total = 0
    for target in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, target))
        size = sum(os.path.getsize(os.path.join(OUT, target, f)) for f in files)
        total += size
        print(f"{target}: {len(files)} seeds, {size} bytes")
    print(f"total: {total} bytes")


if __name__ == "__main__":
    main()
