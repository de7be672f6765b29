#!/usr/bin/env python3
"""Renders the chat corpus (tests/data/chat_corpus/conversations.json) with Gemma-4's reference
chat template through Hugging Face transformers and writes tests/data/chat_corpus/expected.json,
which tests/tokenizer/chat_corpus_test.cc compares gannet's own renderings against, text and
token ids.

The reference template is not stored in this repository (its license is not ours to grant):
pass a copy with --template, e.g. a Gemma-4 checkpoint's chat_template.jinja, or llama.cpp's
models/templates/google-gemma-4-31B-it.jinja (16508 bytes, sha256
083b16458a577de64294cc04635c6b2cf7c9f35df715be4951ef4f884dfa98f3 is the copy the committed file
was made from). That is the large-model template (31B, 26B-A4B). The small-model (E2B/E4B)
rendering is derived from it by dropping the empty thought channel that the large template
appends to the generation prompt when thinking is off (the one place the two differ); the script
fails if that block is not found.

Renderers:
  --renderer transformers  (default) tokenizer.apply_chat_template(..., tokenize=False) and
                           (tokenize=True) with the tiny checkpoint's tokenizer.json: text and ids.
  --renderer jinja2        plain Jinja2 in Hugging Face's settings (sandboxed, trim_blocks,
                           lstrip_blocks, loopcontrols, HF's tojson/raise_exception/strftime_now);
                           text only. For machines without transformers; the file records which
                           renderer made it, and the C++ test reports it.

Usage on a machine with transformers (5.17.0 made the committed file, torch on the CPU):
  python3 tools/golden/chat_template_golden.py --template /path/to/gemma-4-31B-it/chat_template.jinja
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(REPO, "tests", "data", "chat_corpus", "conversations.json")
OUT = os.path.join(REPO, "tests", "data", "chat_corpus", "expected.json")
TOKENIZER = os.path.join(REPO, "tests", "data", "tiny", "31b", "tokenizer.json")

LARGE_TAIL = """        {{- '<|turn>model\\n' -}}
        {%- if not enable_thinking | default(false) -%}
            {{- '<|channel>thought\\n<channel|>' -}}
        {%- endif -%}
"""
SMALL_TAIL = """        {{- '<|turn>model\\n' -}}
"""


def load_cases():
    with open(CORPUS, encoding="utf-8") as f:
        corpus = json.load(f)
    cases = []
    for case in corpus["cases"]:
        tools = [corpus["tools"][t] for t in case.get("tools", [])] or None
        kwargs = {}
        for key in ("enable_thinking", "preserve_thinking"):
            if key in case:
                kwargs[key] = case[key]
        cases.append((case["name"], case["messages"], tools,
                      case.get("add_generation_prompt", True), kwargs))
    return cases


def jinja2_renderer(template):
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    compiled = env.from_string(template)

    def render(messages, tools, add_generation_prompt, kwargs):
        return compiled.render(messages=messages, tools=tools,
                               add_generation_prompt=add_generation_prompt, bos_token="<bos>",
                               eos_token="<eos>", **kwargs), None

    return render


def transformers_renderer(template):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=TOKENIZER, bos_token="<bos>", eos_token="<eos>",
                                  pad_token="<pad>", unk_token="<unk>")
    tok.chat_template = template

    def render(messages, tools, add_generation_prompt, kwargs):
        text = tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **kwargs)
        ids = tok.apply_chat_template(messages, tools=tools, tokenize=True,
                                      add_generation_prompt=add_generation_prompt,
                                      return_dict=False, **kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return text, [int(i) for i in ids]

    return render


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--template", required=True, help="Gemma-4 31B-it chat_template.jinja")
    ap.add_argument("--renderer", choices=["transformers", "jinja2"], default="transformers")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()

    with open(args.template, encoding="utf-8") as f:
        large = f.read()
    if LARGE_TAIL not in large:
        sys.exit("the large template's generation-prompt block was not found; is this Gemma-4 31B?")
    small = large.replace(LARGE_TAIL, SMALL_TAIL)

    if args.renderer == "transformers":
        import transformers
        make, version = transformers_renderer, "transformers " + transformers.__version__
    else:
        import jinja2
        make, version = jinja2_renderer, "jinja2 " + jinja2.__version__ + " (HF settings)"

    result = {
        "about": "Expected renderings of conversations.json; made by "
                 "tools/golden/chat_template_golden.py, do not edit.",
        "renderer": args.renderer,
        "renderer_version": version,
        "template_sha256": hashlib.sha256(large.encode("utf-8")).hexdigest(),
        "template_bytes": len(large.encode("utf-8")),
        "token_ids_from": os.path.relpath(TOKENIZER, REPO) if args.renderer == "transformers" else None,
        "variants": {},
    }
    for variant, template in (("large", large), ("small", small)):
        render = make(template)
        out = {}
        for name, messages, tools, agp, kwargs in load_cases():
            text, ids = render(messages, tools, agp, kwargs)
            out[name] = {"text": text}
            if ids is not None:
                out[name]["ids"] = ids
        result["variants"][variant] = out
    with open(args.out, "w", encoding="utf-8") as f:
        text = json.dumps(result, ensure_ascii=False, indent=1)
        # One line per id list: the file stays readable and diffs stay small.
        text = re.sub(r"\[\n\s*(-?\d+(?:,\n\s*-?\d+)*)\n\s*\]",
                      lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text)
        f.write(text + "\n")
    print(f"wrote {args.out}: {len(result['variants']['large'])} cases x 2 variants ({version})")


if __name__ == "__main__":
    main()
