#!/usr/bin/env python3
"""Reference dumps for gannet's parity tests, computed with HF transformers' Gemma-4 classes.

For each tiny target checkpoint (tests/data/tiny/<variant>) this script:
  1. checks that the checkpoint's tensor names are exactly what HF's Gemma4ForCausalLM (or, for
     drafters, Gemma4AssistantForCausalLM) expects -- no missing and no unexpected tensors;
  2. loads the weights into Gemma4ForCausalLM in float32 (eager attention);
  3. runs two fixed prompts, one shorter and one longer than the sliding window, and dumps the
     logits of every position plus a 16-token greedy continuation of each prompt.
The greedy continuation is computed twice, with and without the KV cache, and the script fails if
the two disagree (docs/gemma4-model.md §7.16 warns that they once did for KV-shared models).

For each target with a drafter (tests/data/tiny/<variant>-assistant) it also runs HF's
Gemma4AssistantForCausalLM for three greedy draft steps after each prompt, in the convention
gannet implements (docs/gemma4-model.md §3.4, HF's reference positions):
  committed KV = the prompt's positions 0 .. L-1 (from the target's shared_kv_states; the sliding
  layers get exactly the last W committed keys), bonus b = the target's arg-max at L-1,
  h = the target's post-final-norm hidden state at L-1, every draft query at position L;
  step 1 takes (b, h), step k > 1 takes (d_{k-1}, h_next of step k-1).
HF's own assisted generate differs in details gannet deliberately does not copy: its sliding
overlay admits W + 1 keys, it crops the shared KV to include one stale key after a partial
accept, and its first round after prefill takes the hidden state of position 0 (n_last_matches
indexes into the prefill output). Feeding the drafter module explicit inputs pins the math down.

The released checkpoints are bf16, and HF casts the embedding scale sqrt(H) to the weight dtype
before multiplying (Gemma4TextScaledWordEmbedding). Loading in float32 would skip that rounding,
so the script sets the scale buffers to their bf16-rounded values: the reference is what HF
computes for the bf16 checkpoint, evaluated in float32.

Output: tests/data/golden/<variant>.safetensors with, per prompt P in {short, long}:
  P.input_ids [n] int64, P.logits [n, vocab] float32, P.greedy [16] int64;
and tests/data/golden/<variant>-assistant.safetensors with, per prompt P:
  P.bonus [1] int64, P.draft_logits [3, vocab] float32 (HF's: tokens outside the top clusters
  hold min(selected) - 1), P.draft_hidden [3, backbone] float32 (h_next), P.draft_tokens [3] int64.

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
GREEDY_TOKENS = 16
DRAFT_STEPS = 3
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


def build_drafter(path):
    """Loads a drafter checkpoint into HF's class; fails unless its tensor names are exactly HF's."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("model_type", None)
    cfg.pop("architectures", None)
    config = Gemma4AssistantConfig(**cfg)
    config._attn_implementation = "eager"
    config.get_text_config()._attn_implementation = "eager"
    model = Gemma4AssistantForCausalLM(config).to(torch.float32).eval()
    expected = set(model.state_dict().keys()) - {"lm_head.weight"}
    raw = load_checkpoint(path)
    have = set(raw.keys())
    if expected != have:
        sys.exit(f"{path}: drafter tensor names differ from HF: missing "
                 f"{sorted(expected - have)[:5]}, unexpected {sorted(have - expected)[:5]}")
    state = {k: (v if k.endswith("token_ordering") else v.to(torch.float32)) for k, v in raw.items()}
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    return model, config


@torch.no_grad()
def draft_reference(target, tconfig, drafter, ids):
    """DRAFT_STEPS greedy drafter steps after the target has committed `ids` (see the docstring)."""
    out = target(input_ids=ids.unsqueeze(0), use_cache=False, output_hidden_states=True,
                 return_shared_kv_states=True)
    L = ids.shape[0]
    W = tconfig.sliding_window
    kv = out.shared_kv_states
    k_s, v_s = kv["sliding_attention"]
    shared = {"full_attention": kv["full_attention"],
              "sliding_attention": (k_s[:, :, -W:], v_s[:, :, -W:])}
    if kv["full_attention"][0].shape[2] != L:
        sys.exit(f"full-attention shared KV holds {kv['full_attention'][0].shape[2]} keys, not {L}")
    bonus = int(torch.argmax(out.logits[0, -1]))
    hidden = out.hidden_states[-1][:, -1:]  # post-final-norm (HF ties hidden_states[-1] to it)
    if not torch.equal(hidden, target.model(input_ids=ids.unsqueeze(0)).last_hidden_state[:, -1:]):
        sys.exit("hidden_states[-1] is not the post-norm last_hidden_state")
    token = torch.tensor([[bonus]])
    logits, hiddens, tokens = [], [], []
    for _ in range(DRAFT_STEPS):
        embeds = torch.cat([target.model.embed_tokens(token), hidden], dim=-1)
        r = drafter(inputs_embeds=embeds, position_ids=torch.tensor([[L]]), shared_kv_states=shared)
        logits.append(r.logits[0, 0])
        hidden = r.last_hidden_state
        hiddens.append(hidden[0, 0])
        token = r.logits.argmax(dim=-1)
        tokens.append(int(token))
    return {"bonus": torch.tensor([bonus], dtype=torch.int64),
            "draft_logits": torch.stack(logits).to(torch.float32).contiguous(),
            "draft_hidden": torch.stack(hiddens).to(torch.float32).contiguous(),
            "draft_tokens": torch.tensor(tokens, dtype=torch.int64)}


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
    for v in args.variants:
        path = os.path.join(args.tiny_dir, v)
        model, config = build_target(path)
        drafter_path = os.path.join(args.tiny_dir, v + "-assistant")
        drafter = build_drafter(drafter_path)[0] if os.path.isdir(drafter_path) else None
        out, draft_out = {}, {}
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
            if drafter is not None:
                for key, t in draft_reference(model, config, drafter, ids).items():
                    draft_out[f"{name}.{key}"] = t
                print(f"{v}-assistant/{name}: bonus {draft_out[name + '.bonus'].tolist()}, "
                      f"drafts {draft_out[name + '.draft_tokens'].tolist()}")
        meta = {"transformers": transformers.__version__, "torch": torch.__version__,
                "attn_implementation": "eager", "dtype": "float32"}
        save_file(out, os.path.join(args.out, f"{v}.safetensors"), metadata=meta)
        if drafter is not None:
            save_file(draft_out, os.path.join(args.out, f"{v}-assistant.safetensors"),
                      metadata=meta)


if __name__ == "__main__":
    main()
