#!/usr/bin/env python3
"""HF oracle for gannet's compressed-tensors checkpoints: int4 (pack-quantized W4A16) and FP8
(float-quantized, weights and dynamic FP8 activations).

For each checkpoint folder written by `gannet quantize` from a tiny target (tests/data/tiny):
  1. parses its quantization_config with compressed-tensors' own QuantizationConfig (pydantic:
     the config gannet writes must be one compressed-tensors accepts);
  2. builds HF's Gemma4ForCausalLM in float32 (eager attention), as tools/golden/make_golden.py
     does, and for every Linear/Embedding module of the text decoder asks compressed-tensors'
     matcher (is_match with the config's targets and ignore, on the checkpoint's module names)
     whether it is quantized; the answer must agree with the tensors present (weight_packed or
     weight), so gannet's and compressed-tensors' reading of targets/ignore agree;
  3. decompresses each quantized module with compressed-tensors' PackedQuantizationCompressor
     (its unpacking and dequantize, not ours; scales widened to f32, see decompress below) and
     loads the values; per-expert MoE modules
     (experts.{i}.{gate,up,down}_proj) go into HF's fused 3-D expert parameters (gate rows, then
     up rows), as gannet gathers them;
  4. runs make_golden.py's two prompts and dumps every position's logits.

Output: <out>/int4-<name>.safetensors (fp8-<name> for FP8 checkpoints) with short/long .input_ids [n] int64 and .logits
[n, vocab] float32; tests/parity/quantized_test.cc (QuantizedHfOracle) compares gannet's CPU
logits for the same checkpoint against it (1e-3 of max |logit|) when the file is present.

Usage: int4_oracle.py --out DIR NAME=CHECKPOINT_DIR [...]
  NAME is what the test expects: <variant>-<spec>, e.g. 31b-int4-g32 (tools/gpu/int4_oracle.sh
  writes the checkpoints and runs this). Needs torch, transformers 5.x, safetensors and
  compressed-tensors (tested with 0.20.1).
"""
import argparse
import json
import os
import re
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden  # noqa: E402  (the tiny model builder and prompts)

from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor  # noqa: E402
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor  # noqa: E402
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor  # noqa: E402
from compressed_tensors.quantization import apply_quantization_config  # noqa: E402
from compressed_tensors.quantization import QuantizationConfig  # noqa: E402
from compressed_tensors.utils.match import is_match  # noqa: E402
from transformers import Gemma4TextConfig  # noqa: E402
from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM  # noqa: E402

EXPERT = re.compile(r"^(.*\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)$")


def build(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    qcfg = QuantizationConfig.model_validate(cfg["quantization_config"])
    # The format's own compressor: its unpacking and dequantize are the reference.
    compressors = {"pack-quantized": PackedQuantizationCompressor,
                   "float-quantized": FloatQuantizationCompressor,
                   "nvfp4-pack-quantized": NVFP4PackedCompressor}
    if qcfg.format not in compressors or len(qcfg.config_groups) != 1:
        sys.exit(f"{path}: expected one pack-quantized or float-quantized config group, "
                 f"got {qcfg.format}")
    compressor = compressors[qcfg.format]
    scheme = next(iter(qcfg.config_groups.values()))
    targets, ignore = scheme.targets, qcfg.ignore or []

    wrapper = cfg["model_type"] == "gemma4"
    text_cfg = dict(cfg["text_config"] if wrapper else cfg)
    text_cfg.pop("model_type", None)
    text_cfg.pop("quantization_config", None)
    config = Gemma4TextConfig(**text_cfg)
    config._attn_implementation = "eager"
    model = Gemma4ForCausalLM(config).to(torch.float32).eval()
    prefix = "model.language_model." if wrapper else "model."

    raw = make_golden.load_checkpoint(path)
    # Group the checkpoint's tensors by module.
    modules = {}
    for name, t in raw.items():
        if name.startswith(make_golden.TOWER_PREFIXES):
            continue
        mod, _, leaf = name.rpartition(".")
        modules.setdefault(mod, {})[leaf] = t

    # 2. compressed-tensors' matcher agrees with the tensors present, module by module.
    hf_modules = dict(model.named_modules())
    checked = 0
    for hf_name, module in hf_modules.items():
        if not isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            continue
        if not hf_name.startswith("model."):
            continue  # lm_head: tied
        ckpt_name = prefix + hf_name[len("model."):]
        quantized = is_match(ckpt_name, module, targets, ignore)
        present = modules.get(ckpt_name, {})
        if not present:
            continue  # e.g. KV-shared layers' k/v, which the checkpoint may omit
        if quantized != ("weight_scale" in present):
            sys.exit(f"{path}: compressed-tensors says {ckpt_name} is "
                     f"{'quantized' if quantized else 'plain'}, the checkpoint holds "
                     f"{sorted(present)}")
        checked += 1

    # 3. decompress with compressed-tensors and assemble the state dict.
    state = {}
    experts = {}
    n_quantized = 0
    for mod, tensors in modules.items():
        if not mod.startswith(prefix) and mod != "lm_head":
            sys.exit(f"{path}: unexpected module {mod}")
        if "weight_scale" in tensors:
            # The scales are widened to f32 first: compressed-tensors dequantizes in the scale's
            # dtype, and with bf16 scales q * s is rounded to bf16 (a 4-bit q times an 8-bit
            # mantissa needs up to 11 bits). gannet's CPU backend dequantizes exactly; the
            # widening is exact, so this is compressed-tensors' own unpacking and zero-point
            # arithmetic evaluated without that rounding (docs/quantized-formats.md says how far
            # the bf16-rounded weights move the tiny models' logits).
            tensors = dict(tensors)
            tensors["weight_scale"] = tensors["weight_scale"].to(torch.float32)
            out = compressor.decompress(tensors, scheme)
            w = out["weight"].to(torch.float32)
            n_quantized += 1
            m = EXPERT.match(mod)
            if m:
                experts.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = w
                continue
            state["model." + mod[len(prefix):] + ".weight"] = w
        else:
            m = EXPERT.match(mod)
            for leaf, t in tensors.items():
                if m:
                    experts.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = \
                        t.to(torch.float32)
                else:
                    state["model." + mod[len(prefix):] + "." + leaf] = t.to(torch.float32)
    for base, per in experts.items():
        hf_base = "model." + base[len(prefix):]
        ids = sorted(per)
        if "gate_proj" in per[ids[0]]:
            state[hf_base + ".gate_up_proj"] = torch.stack(
                [torch.cat([per[i]["gate_proj"], per[i]["up_proj"]], 0) for i in ids])
        if "down_proj" in per[ids[0]]:
            state[hf_base + ".down_proj"] = torch.stack([per[i]["down_proj"] for i in ids])
    expected = set(model.state_dict().keys()) - {"lm_head.weight"}
    missing, extra = expected - set(state), set(state) - expected
    if missing or extra:
        sys.exit(f"{path}: tensor names differ from HF: missing {sorted(missing)[:5]}, "
                 f"unexpected {sorted(extra)[:5]}")
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    with torch.no_grad():
        model.model.embed_tokens.embed_scale.fill_(make_golden.bf16_round(config.hidden_size ** 0.5))
        if config.hidden_size_per_layer_input:
            p = config.hidden_size_per_layer_input
            model.model.embed_tokens_per_layer.embed_scale.fill_(make_golden.bf16_round(p ** 0.5))
    if scheme.input_activations is not None:
        # FP8 activations: compressed-tensors wraps each quantized module's forward so that its
        # input is quantized and dequantized (dynamically, as the scheme says) before the matmul.
        # The status "compressed" keeps it from re-quantizing the weights just loaded.
        apply_quantization_config(model, qcfg, show_progress=False)
        wrapped = sum(1 for m in model.modules() if hasattr(m, "quantization_scheme"))
        print(f"{path}: {wrapped} modules quantize their inputs ({scheme.input_activations.strategy})")
    print(f"{path}: {n_quantized} modules decompressed by compressed-tensors, "
          f"{checked} modules' targets/ignore agree")
    return model, config


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("checkpoints", nargs="+", help="NAME=DIR")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for item in args.checkpoints:
        name, _, path = item.partition("=")
        model, config = build(path)
        out = {}
        for p, ids in make_golden.prompts(config.vocab_size, config.sliding_window).items():
            logits = model(input_ids=ids[None]).logits[0].to(torch.float32)
            out[f"{p}.input_ids"] = ids.to(torch.int64).contiguous()
            out[f"{p}.logits"] = logits.contiguous()
        prefix = "int4" if "int4" in name else "nvfp4" if "nvfp4" in name else "fp8"
        dst = os.path.join(args.out, f"{prefix}-{name}.safetensors")
        save_file(out, dst, metadata={"checkpoint": name, "transformers": make_golden.transformers.__version__})
        print(f"wrote {dst}")


if __name__ == "__main__":
    main()
