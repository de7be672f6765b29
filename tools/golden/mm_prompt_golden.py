#!/usr/bin/env python3
"""Reference dumps for images in gannet's engine: a prompt with two images through HF's
Gemma4ForConditionalGeneration, every position's logits and a greedy continuation.

Checkpoints: the tiny multimodal models tests/data/tiny/mm-31b (dense, bidirectional image
attention on sliding layers) and mm-e4b (per-layer embeddings, causal), made by
tools/golden/make_multimodal_tiny.py; loaded as HF loads them (from_pretrained, float32, eager
attention) with the text embedding scales set to their bf16-rounded values, as
tools/golden/make_golden.py does (HF multiplies by the scale cast to the checkpoint's bf16).

Images: the two deterministic random images of tests/data/golden/mm-vision-input.safetensors
(6 x 9 and 12 x 3 patches; pixel = u8 / 255), in the preprocessor's layout padded to 630 patches
(a 70 soft-token budget): 6 and 4 soft tokens. The prompt's ids are built directly as HF's
processor would expand them:
  bos, text, boi, 6 x image token, eoi, text, boi, 4 x image token, eoi, text
and mm_token_type_ids marks the image soft tokens only (1), as the processor does (boi and eoi are
text). The image soft tokens' embeddings are the tower's features (HF's masked_scatter); on
mm-e4b their per-layer inputs use the pad token.

Output: tests/data/golden/mm-<variant>-prompt.safetensors with
  input_ids [n] int64, mm_token_type_ids [n] int64,
  pixels_u8 [90, 768] uint8 (real patches of both images, image 0 first), grid [2, 2] int32
  (rows, columns), max_patches [1] int64 (630): the C++ test rebuilds pixel_values/positions
  exactly from these (padding rows zero pixels at (-1, -1));
  logits [n, vocab] float32 (every prompt position, after the final softcap);
  greedy [16] int64: greedy continuation with the KV cache (HF generate), checked equal to a
  loop without the cache that reruns the whole sequence (pixels included) at every step.

Usage: mm_prompt_golden.py [--tiny-dir tests/data/tiny] [--out tests/data/golden]
Needs torch, transformers (tested with 5.17.0) and safetensors.
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import Gemma4ForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import bf16_round  # noqa: E402

MAX_PATCHES = 630
POOL = 3
NUM_GREEDY = 16


def load(path):
    model = Gemma4ForConditionalGeneration.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager").eval()
    tc = model.config.get_text_config()
    lm = model.model.language_model
    with torch.no_grad():
        lm.embed_tokens.embed_scale.fill_(bf16_round(tc.hidden_size ** 0.5))
        if tc.hidden_size_per_layer_input:
            lm.embed_tokens_per_layer.embed_scale.fill_(
                bf16_round(tc.hidden_size_per_layer_input ** 0.5))
    return model


def images(golden_dir):
    raw = load_file(os.path.join(golden_dir, "mm-vision-input.safetensors"))
    u8, grid = raw["pixels_u8"], raw["grid"]
    pv = torch.zeros(len(grid), MAX_PATCHES, u8.shape[1])
    pos = torch.full((len(grid), MAX_PATCHES, 2), -1, dtype=torch.long)
    start = 0
    for i, (rows, cols) in enumerate(grid.tolist()):
        n = rows * cols
        pv[i, :n] = u8[start:start + n].to(torch.float32) / 255.0
        ys, xs = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
        pos[i, :n, 0] = xs.reshape(-1)
        pos[i, :n, 1] = ys.reshape(-1)
        start += n
    soft = [r * c // (POOL * POOL) for r, c in grid.tolist()]
    return u8, grid, pv, pos, soft


def prompt(cfg, soft):
    boi, img, eoi = cfg.boi_token_id, cfg.image_token_id, cfg.eoi_token_id
    bos = cfg.get_text_config().bos_token_id
    ids = ([bos, 40, 41, 42, boi] + [img] * soft[0] + [eoi, 50, 51, 52, 53, 54, boi] +
           [img] * soft[1] + [eoi, 60, 61, 62, 63])
    ids = torch.tensor([ids])
    return ids, (ids == img).to(torch.long)


@torch.no_grad()
def run(model, ids, mm, pv, pos):
    out = model(input_ids=ids, mm_token_type_ids=mm, pixel_values=pv, image_position_ids=pos)
    logits = out.logits[0].float().contiguous()
    gen = model.generate(input_ids=ids, mm_token_type_ids=mm, pixel_values=pv,
                         image_position_ids=pos, max_new_tokens=NUM_GREEDY, do_sample=False,
                         min_new_tokens=NUM_GREEDY, use_cache=True)
    greedy = gen[0, ids.shape[1]:]
    # Without the cache: the whole sequence (pixels included) again at every step.
    seq, mseq = ids, mm
    for _ in range(NUM_GREEDY):
        nxt = model(input_ids=seq, mm_token_type_ids=mseq, pixel_values=pv,
                    image_position_ids=pos).logits[0, -1].argmax()
        seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
        mseq = torch.cat([mseq, torch.zeros(1, 1, dtype=torch.long)], dim=1)
    if not torch.equal(seq[0, ids.shape[1]:], greedy):
        sys.exit(f"greedy with the cache {greedy.tolist()} differs from without "
                 f"{seq[0, ids.shape[1]:].tolist()}")
    return logits, greedy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny-dir", default="tests/data/tiny")
    ap.add_argument("--out", default="tests/data/golden")
    args = ap.parse_args()
    torch.manual_seed(0)
    u8, grid, pv, pos, soft = images(args.out)
    for kind in ("mm-31b", "mm-e4b"):
        model = load(os.path.join(args.tiny_dir, kind))
        ids, mm = prompt(model.config, soft)
        logits, greedy = run(model, ids, mm, pv, pos)
        path = os.path.join(args.out, f"{kind}-prompt.safetensors")
        save_file({"input_ids": ids[0].contiguous(), "mm_token_type_ids": mm[0].contiguous(),
                   "pixels_u8": u8.contiguous(), "grid": grid.contiguous(),
                   "max_patches": torch.tensor([MAX_PATCHES]),
                   "logits": logits, "greedy": greedy.contiguous()}, path)
        print(f"{path}: {ids.shape[1]} positions, soft tokens {soft}, greedy {greedy.tolist()}")


if __name__ == "__main__":
    main()
