#!/usr/bin/env python3
"""Reference dumps for gannet's bidirectional image-block attention, from HF transformers.

Gemma-4 models whose text config says use_bidirectional_attention = "vision" let the soft tokens
of one image attend to each other in both directions during prefill. HF builds that mask in
modeling_gemma4.py: get_block_sequence_ids_for_mask turns mm_token_type_ids into block ids (one id
per run of image tokens, -1 for text) and create_masks_for_vision_model composes
  full-attention layers:    causal
  sliding-window layers:    AND(window, OR(causal, same block))
This script calls exactly those two HF functions, with the tiny 31B checkpoint's text model
(tests/data/tiny/31b, loaded as tools/golden/make_golden.py loads it: float32, eager attention,
bf16-rounded embedding scale), and passes the resulting masks to the text model.

No vision tower is involved: the positions marked as image tokens embed their ordinary token ids
(the text model's own embedding), which is what gannet computes when it is given image blocks
over plain token ids. So the only difference from a text-only run is the mask.

Two prompts, text + block + text + block + text (tiny model: sliding window 16):
  narrow: blocks of 5 and 7 positions, the second crossing position 16;
  wide:   blocks of 5 and 19 positions, the second longer than the window.
Output: tests/data/golden/31b-bidir.safetensors with, per prompt P:
  P.input_ids [n] int64, P.blocks [k, 2] int64 ([begin, end) of each block),
  P.block_ids [n] int64 (HF's block sequence ids), P.sliding_mask [n, n] int64 and
  P.full_mask [n, n] int64 (1 = query row may attend key column), P.logits [n, vocab] float32.

Usage: bidir_mask_golden.py [--tiny-dir tests/data/tiny] [--out tests/data/golden]
Needs torch, transformers (tested with 5.17.0) and safetensors.
"""
import argparse
import os
import sys

import torch
from safetensors.torch import save_file
from transformers.models.gemma4.modeling_gemma4 import (create_masks_for_vision_model,
                                                        get_block_sequence_ids_for_mask)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import build_target  # noqa: E402  (same loading as the parity dumps)

PROMPTS = {
    # name: (length, [(begin, end), ...])
    "narrow": (36, [(6, 11), (14, 21)]),
    "wide": (44, [(6, 11), (14, 33)]),
}


def visible(mask, n):
    """HF's 4-D mask [1, 1, n, n] (bool, or additive float) as 0/1 int64 [n, n]."""
    m = mask[0, 0]
    if m.dtype == torch.bool:
        v = m
    else:
        v = m == 0
    if v.shape != (n, n):
        sys.exit(f"mask has shape {tuple(v.shape)}, expected {(n, n)}")
    return v.to(torch.int64).contiguous()


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny-dir", default="tests/data/tiny")
    ap.add_argument("--out", default="tests/data/golden")
    args = ap.parse_args()
    model, config = build_target(os.path.join(args.tiny_dir, "31b"))
    if config.use_bidirectional_attention != "vision":
        sys.exit("the tiny 31b model is expected to use bidirectional attention over images")
    g = torch.Generator().manual_seed(59)
    out = {}
    for name, (n, blocks) in PROMPTS.items():
        body = torch.randint(108, config.vocab_size, (n - 1,), generator=g)
        ids = torch.cat([torch.tensor([2]), body]).unsqueeze(0)
        mm_types = torch.zeros_like(ids)
        for b, e in blocks:
            mm_types[0, b:e] = 1  # what Gemma4Processor marks for an image's soft tokens
        block_ids = get_block_sequence_ids_for_mask(mm_types, device=ids.device)
        embeds = model.model.embed_tokens(ids)
        masks = create_masks_for_vision_model(
            config=config, inputs_embeds=embeds, attention_mask=None, cache=None,
            position_ids=torch.arange(n).unsqueeze(0), block_sequence_ids=block_ids)
        logits = model(input_ids=ids, attention_mask=masks, use_cache=False).logits[0]
        plain = model(input_ids=ids, use_cache=False).logits[0]
        if torch.allclose(logits, plain):
            sys.exit(f"{name}: the image-block mask changes nothing; the dump would test nothing")
        out[f"{name}.input_ids"] = ids[0].to(torch.int64).contiguous()
        out[f"{name}.blocks"] = torch.tensor(blocks, dtype=torch.int64)
        out[f"{name}.block_ids"] = block_ids[0].to(torch.int64).contiguous()
        out[f"{name}.sliding_mask"] = visible(masks["sliding_attention"], n)
        out[f"{name}.full_mask"] = visible(masks["full_attention"], n)
        out[f"{name}.logits"] = logits.to(torch.float32).contiguous()
        print(f"{name}: n={n} blocks={blocks} max|logit diff vs causal|="
              f"{(logits - plain).abs().max().item():.4f}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "31b-bidir.safetensors")
    save_file(out, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
