#!/usr/bin/env python3
"""Trains the tiny Gemma-4's tokenizer and writes a folder that gannet and HF transformers load.

The tokenizer is tools/tokenizer/gemma_bpe.py's Gemma-style byte-fallback BPE (Gemma-4 special
tokens at their real ids 0..106, "\\n" = 107, the 256 byte tokens, Gemma's whitespace runs, then
merges), trained on the training split written by fetch_corpus.sh (kjv.txt + web.txt; the
held-out Revelation files are not read), cut to exactly --vocab ids. Deterministic: the same
corpus gives a byte-identical tokenizer.json.

Writes to --out:
  tokenizer.json         what gannet reads (lib/tokenizer), and HF's tokenizer file
  tokenizer_config.json  for AutoTokenizer: GemmaTokenizer (transformers' Gemma pipeline is this
                         one) and the named special tokens
  chat_template.jinja    for apply_chat_template. gannet never reads it: it renders Gemma-4's
                         chat format in C++ (lib/tokenizer/chat_template.cc) and picks the large-
                         or small-model generation prompt from config.json (E2B/E4B are small).
                         This template is written for this project (the official one is not ours
                         to copy) and renders text-only chats byte for byte like gannet's
                         (checked against tests/data/tokenizer/chat_template_expected.json by
                         --check-template); pass the --variant the model's config.json implies.

Usage:
  tools/train_tiny/fetch_corpus.sh /tmp/corpus
  python3 tools/train_tiny/train_tokenizer.py --corpus /tmp/corpus --out /tmp/tiny_tok
Needs `tokenizers` (pip install tokenizers==0.23.3); --check-template also needs transformers.
"""

import argparse
import json
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "tokenizer"))
from gemma_bpe import SPECIALS, build_tokenizer, train  # noqa: E402

# Text-only Gemma-4 chat format, the shape of lib/tokenizer/chat_template.h: <bos>; a system turn
# when thinking is on or the first message is system/developer; one turn per message (assistant
# is "model", consecutive assistant messages share a turn, model text loses its thought
# channels); reasoning after the last user message; then the generation prompt.
TEMPLATE = """\
{%- macro strip_thinking(text) -%}
    {%- set ns = namespace(out='') -%}
    {%- for part in text.split('<channel|>') -%}
        {%- set ns.out = ns.out + part.split('<|channel>')[0] -%}
    {%- endfor -%}
    {{- ns.out | trim -}}
{%- endmacro -%}
{%- set thinking = enable_thinking | default(false) -%}
{{- bos_token -}}
{%- set leading_system = messages[0].role in ['system', 'developer'] -%}
{%- if thinking or leading_system -%}
    {{- '<|turn>system\\n' -}}
    {%- if thinking -%}{{- '<|think|>\\n' -}}{%- endif -%}
    {%- if leading_system -%}{{- messages[0].content | trim -}}{%- endif -%}
    {{- '<turn|>\\n' -}}
{%- endif -%}
{%- set turns = messages[1:] if leading_system else messages -%}
{%- set ns = namespace(last_user=-1) -%}
{%- for m in turns -%}
    {%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- for m in turns -%}
    {%- if m.role not in ['system', 'developer', 'user', 'assistant', 'model'] -%}
        {{- raise_exception('unsupported role ' + m.role) -}}
    {%- endif -%}
    {%- set role = 'model' if m.role == 'assistant' else m.role -%}
    {%- set continues = role == 'model' and loop.index0 > 0
                        and turns[loop.index0 - 1].role == 'assistant' -%}
    {%- if not continues -%}
        {{- '<|turn>' + role + '\\n' -}}
    {%- endif -%}
    {%- if m.reasoning and (loop.index0 > ns.last_user or preserve_thinking | default(false)) -%}
        {{- '<|channel>thought\\n' + m.reasoning + '\\n<channel|>' -}}
    {%- endif -%}
    {%- if role == 'model' -%}
        {{- strip_thinking(m.content) -}}
    {%- else -%}
        {{- m.content | trim -}}
    {%- endif -%}
    {{- '<turn|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{- '<|turn>model\\n' -}}
GENERATION_TAIL{%- endif -%}
"""
# 31B / 26B-A4B shape: an empty thought channel when thinking is off. E2B / E4B: the bare opener.
LARGE_TAIL = """\
    {%- if not thinking -%}{{- '<|channel>thought\\n<channel|>' -}}{%- endif -%}
"""


def chat_template(variant):
    return TEMPLATE.replace("GENERATION_TAIL", LARGE_TAIL if variant == "large" else "")


def check_template():
    """Renders every case of gannet's chat-template fixture with ours; exits on a mismatch."""
    from transformers.utils.chat_template_utils import render_jinja_template
    path = os.path.join(REPO, "tests", "data", "tokenizer", "chat_template_expected.json")
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    for c in cases:
        got = render_jinja_template(conversations=[c["messages"]],
                                    chat_template=chat_template(c["variant"]), bos_token="<bos>",
                                    eos_token="<eos>", **c["options"])[0][0]
        if got != c["expected"]:
            sys.exit(f"chat template differs:\n{c}\ngot {got!r}")
    print(f"chat template: {len(cases)} fixture cases match")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="fetch_corpus.sh's OUTDIR")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096, help="total ids, specials included")
    ap.add_argument("--variant", choices=["large", "small"], default="large",
                    help="chat template: large = dense/MoE configs, small = E2B/E4B (PLE)")
    ap.add_argument("--check-template", action="store_true")
    args = ap.parse_args()
    if args.check_template:
        check_template()

    lines = []
    for name in ("kjv.txt", "web.txt"):
        with open(os.path.join(args.corpus, name), encoding="utf-8") as f:
            lines += [line for line in f.read().split("\n") if line]
    # A few pieces beyond --vocab: the whitespace extras may already be trained pieces, and
    # build_tokenizer cuts the surplus (the rarest merges) to exactly --vocab.
    trained_vocab, trained_merges = train(lines, args.vocab + 16)
    tok = build_tokenizer(trained_vocab, trained_merges, vocab_size=args.vocab)
    assert tok.get_vocab_size() == args.vocab, tok.get_vocab_size()

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(json.loads(tok.to_str()), ensure_ascii=False, separators=(",", ":")))
    named = {"pad_token": 0, "eos_token": 1, "bos_token": 2, "unk_token": 3, "mask_token": 4}
    config = {
        "tokenizer_class": "GemmaTokenizer",
        **{k: SPECIALS[i] for k, i in named.items()},
        "add_bos_token": True,  # like the post-processor; chat prompts are encoded without it
        "add_eos_token": False,
        "padding_side": "left",
        # Gemma-4's named specials (docs/gemma4-model.md §5), for code that looks them up.
        "sot_token": "<|turn>", "eot_token": "<turn|>", "soc_token": "<|channel>",
        "eoc_token": "<channel|>", "think_token": "<|think|>", "escape_token": '<|"|>',
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(chat_template(args.variant))

    chars = tokens = 0
    for name in ("heldout_kjv.txt", "heldout_web.txt"):
        path = os.path.join(args.corpus, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            chars += len(text)
            tokens += len(tok.encode(text, add_special_tokens=False).ids)
    merges = len(json.loads(tok.to_str())["model"]["merges"])
    print(f"vocab {tok.get_vocab_size()} merges {merges} trained on {len(lines)} lines"
          + (f"; held-out {chars / tokens:.2f} chars/token" if tokens else ""))


if __name__ == "__main__":
    sys.exit(main())
