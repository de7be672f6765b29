#!/usr/bin/env python3
"""Tiny multimodal Gemma-4 checkpoints and HF reference dumps of their vision towers.

Builds two HF-initialised Gemma4ForConditionalGeneration models with small text and vision
configs, seeded, and saves them as HF checkpoint folders (bf16, like the released checkpoints):
  tests/data/tiny/mm-31b  dense text model like tests/data/tiny/31b (K=V full layers,
                          use_bidirectional_attention "vision"); vision tower with standardize
                          true and plain linears (as the 31B/26B-A4B towers);
  tests/data/tiny/mm-e4b  E-series text model like tests/data/tiny/e4b (per-layer embeddings, KV
                          sharing); vision tower with clipped linears and no standardization (as
                          the E2B/E4B towers). audio_config is null: the audio tower is out of scope.
HF initialises some tensors to constants (the position table to ones, std_bias 0, std_scale 1, the
clip bounds to +-inf); the script replaces them with seeded random values (finite clip bounds
tight enough that some activations are clipped) so the dumps exercise them.
Each folder gets config.json, model.safetensors, chat_template.jinja (copied from tiny/31b) and a
tokenizer.json derived from tiny/31b's where the unused added tokens 6, 7, 8 become `<|image>`,
`<|image|>`, `<image|>`; the config's boi/image/eoi ids point at them. The saved folder is
reloaded with from_pretrained and must report no missing or unexpected keys.

Vision input (tests/data/golden/mm-vision-input.safetensors), shared by both checkpoints: two
images in the preprocessor's hand-off layout with max_patches = 70 * 3^2 = 630 (70 soft tokens):
image 0 a grid of 6 x 9 patches (rows x columns, 54 patches), image 1 of 12 x 3 (36 patches).
  pixels_u8 [90, 768] uint8: the real patches of both images, image 0 first; pixel value = u8 / 255
                             (float32), in (patch_y, patch_x, channel) order;
  grid [2, 2] int32: (rows, columns) per image.
Positions are (x, y) = (column, row), row-major; padding rows (up to 630) are zero pixels at
(-1, -1), exactly as HF's image processor pads.

Dumps (tests/data/golden/mm-<variant>-vision.safetensors), HF eager attention, float32, the two
images batched as HF batches them (pixel_values [2, 630, 768]); per image i, real patches only
(a padded row's value never reaches the output):
  img<i>.embed   [n_i, Hv]   the patch embedder's output (projection + 2-D position table)
  img<i>.layer<l> [n_i, Hv]  the output of vision encoder layer l
  img<i>.pooled  [n_i/9, Hv] after 3x3 pooling by position and x sqrt(Hv), padding dropped
  img<i>.standardized [n_i/9, Hv]  after (x - std_bias) * std_scale (= pooled without standardize)
  img<i>.projected [n_i/9, Ht]     embed_vision's output: the soft tokens in the text width

Usage: make_multimodal_tiny.py [--tiny-dir tests/data/tiny] [--out tests/data/golden]
Needs torch, transformers (made with 5.17.0; 5.25.0 wrote the same tensors) and safetensors.
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import Gemma4Config, Gemma4ForConditionalGeneration

SEED = 5901
MAX_SOFT_TOKENS = 70
POOL = 3
PATCH = 16
GRIDS = [(6, 9), (12, 3)]  # (rows, columns) of patches
IMAGE_TOKENS = {6: "<|image>", 7: "<|image|>", 8: "<image|>"}  # boi, image soft token, eoi
BOI, IMAGE, EOI = 6, 7, 8


def text_config(kind):
    common = dict(vocab_size=512, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=16, global_head_dim=32,
                  hidden_activation="gelu_pytorch_tanh", max_position_embeddings=4096,
                  rms_norm_eps=1e-6, pad_token_id=0, eos_token_id=1, bos_token_id=2,
                  tie_word_embeddings=True, sliding_window=16, final_logit_softcapping=30.0,
                  rope_parameters={
                      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                      "full_attention": {"rope_type": "proportional",
                                         "partial_rotary_factor": 0.25, "rope_theta": 1e6}},
                  enable_moe_block=False, use_double_wide_mlp=False)
    if kind == "mm-31b":
        return dict(common, num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
                    num_global_key_value_heads=1, attention_k_eq_v=True,
                    use_bidirectional_attention="vision", vocab_size_per_layer_input=0,
                    hidden_size_per_layer_input=0, num_kv_shared_layers=0)
    return dict(common, num_hidden_layers=4,
                layer_types=["sliding_attention", "full_attention"] * 2,
                attention_k_eq_v=False, use_bidirectional_attention=None,
                vocab_size_per_layer_input=512, hidden_size_per_layer_input=8,
                num_kv_shared_layers=2)


def vision_config(kind):
    # head_dim 16: each spatial half (x, y) has 8 dims, 4 rotation frequencies.
    common = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=16, hidden_activation="gelu_pytorch_tanh",
                  rms_norm_eps=1e-6, pooling_kernel_size=POOL, patch_size=PATCH,
                  position_embedding_size=16,
                  rope_parameters={"rope_type": "axial", "rope_theta": 100.0})
    if kind == "mm-31b":
        return dict(common, standardize=True, use_clipped_linears=False)
    return dict(common, standardize=False, use_clipped_linears=True)


def build(kind):
    torch.manual_seed(SEED + (0 if kind == "mm-31b" else 1))
    config = Gemma4Config(text_config=text_config(kind), vision_config=vision_config(kind),
                          audio_config=None, boi_token_id=BOI, image_token_id=IMAGE,
                          eoi_token_id=EOI, eos_token_id=[1, 106 % 512])
    config._attn_implementation = "eager"
    for sub in (config.text_config, config.vision_config):
        sub._attn_implementation = "eager"
    model = Gemma4ForConditionalGeneration(config).to(torch.float32).eval()
    vt = model.model.vision_tower
    with torch.no_grad():
        pe = vt.patch_embedder.position_embedding_table
        pe.copy_(torch.randn_like(pe) * 0.5)
        if config.vision_config.standardize:
            vt.std_bias.copy_(torch.randn_like(vt.std_bias) * 2.0)
            vt.std_scale.copy_(0.5 + torch.rand_like(vt.std_scale))
        # Norm weights away from their constant init, so a missing weight would show.
        for name, p in vt.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
        if config.vision_config.use_clipped_linears:
            for name, m in vt.named_modules():
                if hasattr(m, "input_min"):
                    # Bounds that clip a few percent of the inputs and of the outputs (HF's
                    # initial weights, std 0.02, give outputs of about +-0.1; measured below).
                    m.input_min.fill_(-2.0 - torch.rand(()).item())
                    m.input_max.fill_(2.0 + torch.rand(()).item())
                    m.output_min.fill_(-0.15 - 0.1 * torch.rand(()).item())
                    m.output_max.fill_(0.15 + 0.1 * torch.rand(()).item())
    return model, config


def images():
    g = torch.Generator().manual_seed(SEED)
    max_patches = MAX_SOFT_TOKENS * POOL * POOL
    dim = 3 * PATCH * PATCH
    u8_rows, pixel_values, positions = [], [], []
    for rows, cols in GRIDS:
        n = rows * cols
        u8 = torch.randint(0, 256, (n, dim), generator=g, dtype=torch.uint8)
        u8_rows.append(u8)
        pv = torch.zeros(max_patches, dim)
        pv[:n] = u8.to(torch.float32) / 255.0
        pos = torch.full((max_patches, 2), -1, dtype=torch.long)
        ys, xs = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
        pos[:n, 0] = xs.reshape(-1)
        pos[:n, 1] = ys.reshape(-1)
        pixel_values.append(pv)
        positions.append(pos)
    inputs = {"pixels_u8": torch.cat(u8_rows).contiguous(),
              "grid": torch.tensor(GRIDS, dtype=torch.int32)}
    return inputs, torch.stack(pixel_values), torch.stack(positions)


def write_tokenizer(src_dir, dst_dir):
    with open(os.path.join(src_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    for entry in tok["added_tokens"]:
        if entry["id"] in IMAGE_TOKENS:
            old, new = entry["content"], IMAGE_TOKENS[entry["id"]]
            if not old.startswith("<unused"):
                sys.exit(f"tokenizer id {entry['id']} is {old}, not an unused token")
            entry["content"] = new
            entry["special"] = True
            del vocab[old]
            vocab[new] = entry["id"]
    with open(os.path.join(dst_dir, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False, separators=(",", ":"))


def save(model, kind, tiny_dir):
    out = os.path.join(tiny_dir, kind)
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    model.to(torch.float32)
    for extra in ("generation_config.json",):
        path = os.path.join(out, extra)
        if os.path.exists(path):
            os.remove(path)
    write_tokenizer(os.path.join(tiny_dir, "31b"), out)
    shutil.copy(os.path.join(tiny_dir, "31b", "chat_template.jinja"), out)
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    if size > 400_000:
        sys.exit(f"{out}: model.safetensors is {size} bytes, above the 400 KB budget")
    return out


def reload(path):
    model, info = Gemma4ForConditionalGeneration.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys") and v}
    if bad:
        sys.exit(f"{path}: reload reports {bad}")
    return model.eval()


@torch.no_grad()
def dump(model, pixel_values, positions):
    vt = model.model.vision_tower
    captured = {}
    hooks = [vt.patch_embedder.register_forward_hook(
        lambda m, i, o: captured.__setitem__("embed", o))]
    for l, layer in enumerate(vt.encoder.layers):
        hooks.append(layer.register_forward_hook(
            lambda m, i, o, l=l: captured.__setitem__(f"layer{l}", o)))
    pooled = {}
    hooks.append(vt.pooler.register_forward_hook(lambda m, i, o: pooled.__setitem__("out", o)))
    feats = model.model.get_image_features(pixel_values, positions, return_dict=True)
    for h in hooks:
        h.remove()
    standardized = feats.last_hidden_state
    projected = torch.cat(feats.pooler_output)
    pooled_all, pooled_mask = pooled["out"]
    out = {}
    soft_start = 0
    clipped = 0
    for i, (rows, cols) in enumerate(GRIDS):
        n, m = rows * cols, rows * cols // (POOL * POOL)
        out[f"img{i}.embed"] = captured["embed"][i, :n]
        for l in range(len(vt.encoder.layers)):
            out[f"img{i}.layer{l}"] = captured[f"layer{l}"][i, :n]
        out[f"img{i}.pooled"] = pooled_all[i][pooled_mask[i]]
        if out[f"img{i}.pooled"].shape[0] != m:
            sys.exit(f"image {i}: {out[f'img{i}.pooled'].shape[0]} pooled rows, expected {m}")
        out[f"img{i}.standardized"] = standardized[soft_start:soft_start + m]
        out[f"img{i}.projected"] = projected[soft_start:soft_start + m]
        soft_start += m
    return {k: v.to(torch.float32).contiguous() for k, v in out.items()}


def clip_fraction(model, pixel_values, positions):
    """Fractions of clippable-linear inputs and outputs that fall outside their bounds."""
    vt = model.model.vision_tower
    stats = [0, 0, 0, 0]

    def hook(m, i, o):
        x, y = i[0], m.linear(torch.clamp(i[0], m.input_min, m.input_max))
        stats[0] += int(((x < m.input_min) | (x > m.input_max)).sum())
        stats[1] += x.numel()
        stats[2] += int(((y < m.output_min) | (y > m.output_max)).sum())
        stats[3] += y.numel()

    hooks = [m.register_forward_hook(hook) for m in vt.modules() if hasattr(m, "input_min")]
    with torch.no_grad():
        model.model.get_image_features(pixel_values, positions, return_dict=True)
    for h in hooks:
        h.remove()
    return stats[0] / max(stats[1], 1), stats[2] / max(stats[3], 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny-dir", default="tests/data/tiny")
    ap.add_argument("--out", default="tests/data/golden")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    inputs, pixel_values, positions = images()
    save_file(inputs, os.path.join(args.out, "mm-vision-input.safetensors"))
    for kind in ("mm-31b", "mm-e4b"):
        built, _ = build(kind)
        path = save(built, kind, args.tiny_dir)
        model = reload(path)
        result = dump(model, pixel_values, positions)
        save_file(result, os.path.join(args.out, f"{kind}-vision.safetensors"))
        note = ""
        if model.config.vision_config.use_clipped_linears:
            inputs, outputs = clip_fraction(model, pixel_values, positions)
            note = f", clipped: {inputs:.1%} of linear inputs, {outputs:.1%} of outputs"
        print(f"{kind}: {path} ({os.path.getsize(os.path.join(path, 'model.safetensors'))} bytes)"
              f"{note}")


if __name__ == "__main__":
    main()
