#!/usr/bin/env python3
"""Reference dumps for gannet's parity tests, computed with HF transformers' Gemma-4 classes.

For each tiny target checkpoint (tests/data/tiny/<variant>) this script:
  1. checks that the checkpoint's tensor names are exactly what HF's Gemma4ForCausalLM (or, for
     drafters, Gemma4AssistantForCausalLM) expects -- no missing and no unexpected tensors;
  2. loads the weights into Gemma4ForCausalLM in float32 (eager attention);
  3. runs two fixed prompts, one shorter and one longer than the sliding window, and dumps the
     logits of every position plus a 16-token greedy continuation of each prompt.
The greedy continuation is computed twice, with and without the KV cache, and the script fails if
the two disagree (gemma4-architecture.md §7.16 warns that they once did for KV-shared models).

The released checkpoints are bf16, and HF casts the embedding scale sqrt(H) to the weight dtype
before multiplying (Gemma4TextScaledWordEmbedding). Loading in float32 would skip that rounding,
so the script sets the scale buffers to their bf16-rounded values: the reference is what HF
computes for the bf16 checkpoint, evaluated in float32.

Output: tests/data/golden/<variant>.safetensors with, per prompt P in {short, long}:
  P.input_ids [n] int64, P.logits [n, vocab] float32, P.greedy [16] int64.

Usage: make_golden.py [--tiny-dir tests/data/tiny] [--out tests/data/golden] [variant ...]
Needs torch, transformers (tested with 5.17.0) and safetensors.
"""
import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM
from transformers.models.gemma4_assistant.configuration_gemma4_assistant import Gemma4AssistantConfig
from transformers.models.gemma4_assistant.modeling_gemma4_assistant import Gemma4AssistantForCausalLM

TARGETS = ["31b", "26b-a4b", "e4b", "e2b"]
DRAFTERS = [t + "-assistant" for t in TARGETS]
GREEDY_TOKENS = 16
TOWER_PREFIXES = ("model.vision_tower.", "model.embed_vision.", "model.audio_tower.",
                  "model.embed_audio.")


def load_checkpoint(path):
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        tensors = {}
        for s in shards:
            tensors.update(load_file(os.path.join(path, s)))
        return tensors
    return load_file(os.path.join(path, "model.safetensors"))


def bf16_round(x):
    return torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).to(torch.float32).item()


def build_target(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    wrapper = cfg["model_type"] == "gemma4"
    text_cfg = dict(cfg["text_config"] if wrapper else cfg)
    text_cfg.pop("model_type", None)
    config = Gemma4TextConfig(**text_cfg)
    config._attn_implementation = "eager"
    model = Gemma4ForCausalLM(config).to(torch.float32).eval()

    raw = load_checkpoint(path)
    prefix = "model.language_model." if wrapper else "model."
    state = {}
    for name, t in raw.items():
        if name.startswith(TOWER_PREFIXES):
            continue
        if not name.startswith(prefix):
            sys.exit(f"{path}: unexpected tensor {name}")
        state["model." + name[len(prefix):]] = t.to(torch.float32)
    expected = set(model.state_dict().keys()) - {"lm_head.weight"}
    missing = expected - set(state)
    extra = set(state) - expected
    if missing or extra:
        sys.exit(f"{path}: tensor names differ from HF: missing {sorted(missing)[:5]}, "
                 f"unexpected {sorted(extra)[:5]}")
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    with torch.no_grad():
        h = config.hidden_size
        model.model.embed_tokens.embed_scale.fill_(bf16_round(h ** 0.5))
        if config.hidden_size_per_layer_input:
            p = config.hidden_size_per_layer_input
            model.model.embed_tokens_per_layer.embed_scale.fill_(bf16_round(p ** 0.5))
    return model, config


def check_drafter_names(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("model_type", None)
    cfg.pop("architectures", None)
    config = Gemma4AssistantConfig(**cfg)
    model = Gemma4AssistantForCausalLM(config)
    expected = set(model.state_dict().keys()) - {"lm_head.weight"}
    have = set(load_checkpoint(path).keys())
    if expected != have:
        sys.exit(f"{path}: drafter tensor names differ from HF: missing "
                 f"{sorted(expected - have)[:5]}, unexpected {sorted(have - expected)[:5]}")


def prompts(vocab, window):
    g = torch.Generator().manual_seed(1234)
    # Ids above the low special-token block; the prompt starts with <bos> (id 2).
    def make(n):
        body = torch.randint(108, vocab, (n - 1,), generator=g)
        return torch.cat([torch.tensor([2]), body])
    return {"short": make(window - 5), "long": make(2 * window + 8)}


@torch.no_grad()
def greedy(model, ids, n, use_cache):
    seq = ids.clone().unsqueeze(0)
    out = []
    past = None
    step_in = seq
    for _ in range(n):
        if use_cache:
            r = model(input_ids=step_in, past_key_values=past, use_cache=True)
            past = r.past_key_values
        else:
            r = model(input_ids=seq, use_cache=False)
        nxt = int(torch.argmax(r.logits[0, -1]))
        out.append(nxt)
        seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
        step_in = torch.tensor([[nxt]])
    return torch.tensor(out, dtype=torch.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny-dir", default="tests/data/tiny")
    ap.add_argument("--out", default="tests/data/golden")
    ap.add_argument("variants", nargs="*", default=TARGETS)
    args = ap.parse_args()
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    for d in DRAFTERS:
        if os.path.isdir(os.path.join(args.tiny_dir, d)):
            check_drafter_names(os.path.join(args.tiny_dir, d))
    for v in args.variants:
        path = os.path.join(args.tiny_dir, v)
        model, config = build_target(path)
        out = {}
        for name, ids in prompts(config.vocab_size, config.sliding_window).items():
            with torch.no_grad():
                logits = model(input_ids=ids.unsqueeze(0), use_cache=False).logits[0]
            g_nocache = greedy(model, ids, GREEDY_TOKENS, use_cache=False)
            g_cache = greedy(model, ids, GREEDY_TOKENS, use_cache=True)
            if not torch.equal(g_nocache, g_cache):
                sys.exit(f"{v}/{name}: HF cached and cache-free greedy outputs differ: "
                         f"{g_cache.tolist()} vs {g_nocache.tolist()}")
            out[f"{name}.input_ids"] = ids.to(torch.int64).contiguous()
            out[f"{name}.logits"] = logits.to(torch.float32).contiguous()
            out[f"{name}.greedy"] = g_nocache
            print(f"{v}/{name}: {len(ids)} tokens, max|logit| {logits.abs().max():.3f}, "
                  f"greedy {g_nocache.tolist()}")
        meta = {"transformers": transformers.__version__, "torch": torch.__version__,
                "attn_implementation": "eager", "dtype": "float32"}
        save_file(out, os.path.join(args.out, f"{v}.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
