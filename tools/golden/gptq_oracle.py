#!/usr/bin/env python3
"""HF oracle for gannet's GPTQ and AWQ loading.

tests/model/gptq_test.cc (GptqOracleExport, with GANNET_GPTQ_EXPORT_DIR set) writes GPTQ and AWQ
checkpoints of the dense tiny models with its own packer (the formats as
docs/quantized-formats.md §7 describes them), each folder with gannet's CPU logits of one prompt
(gannet_logits.safetensors: input_ids [n] int64, logits [n, vocab] f32). This script has HF
transformers load each folder as a quantized model -- through its GPTQ integration (optimum +
gptqmodel or auto-gptq) or its AWQ integration (autoawq), i.e. the reference tools' own unpacking
and kernels -- runs the same prompt and compares:
  - max |logit difference| / max |gannet logit| <= --tol (HF runs these kernels in float16);
  - the greedy (argmax) token at every position agrees on at least --agree of the positions.
A mismatch in the packing (nibble order, the v1 zero-point offset, act-order) moves the logits by
far more than float16 rounding.

Usage: gptq_oracle.py [--tol 0.02] [--agree 0.9] [--device cpu] [--torch-kernels] DIR
  (DIR: the export folder of the test; on a CPU, --torch-kernels: see docs/quantized-formats.md)
Needs torch, transformers 5.x with Gemma-4, and the quantization backends above (gptqmodel 7.7.0
and optimum 2.3.0 were used on 2026-12-07; gptqmodel pulls a newer transformers: pin it back).
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AwqConfig, GPTQConfig


def bf16_round(x):
    return float(torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).to(torch.float32))


@torch.no_grad()
def check(path, tol, agree, device, dtype, backend):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    ref = load_file(os.path.join(path, "gannet_logits.safetensors"))
    kwargs = {}
    if backend:
        # The checkpoint's own config with only the kernel choice changed: the tiny models'
        # widths (16-48) are below what the default CPU kernels accept (multiples of 32).
        q = dict(cfg["quantization_config"])
        method = q["quant_method"]
        q["backend"] = backend[method]
        kwargs["quantization_config"] = (GPTQConfig if method == "gptq" else AwqConfig).from_dict(q)
    model = AutoModelForCausalLM.from_pretrained(
        path, torch_dtype=dtype, device_map=device, attn_implementation="eager", **kwargs)
    model.eval()
    # gannet (like make_golden.py's reference) scales the embeddings by bf16(sqrt(width)), as HF
    # does for bf16 checkpoints.
    inner = model.model
    inner.embed_tokens.embed_scale.fill_(bf16_round(cfg["hidden_size"] ** 0.5))
    p = cfg.get("hidden_size_per_layer_input") or 0
    if p:
        inner.embed_tokens_per_layer.embed_scale.fill_(bf16_round(p ** 0.5))
    ids = ref["input_ids"].to(device)
    logits = model(input_ids=ids[None]).logits[0].to(torch.float32).cpu()
    want = ref["logits"]
    if logits.shape != want.shape:
        return False, f"logits {tuple(logits.shape)}, gannet's {tuple(want.shape)}"
    rel = float((logits - want).abs().max() / want.abs().max())
    same = float((logits.argmax(-1) == want.argmax(-1)).to(torch.float32).mean())
    ok = rel <= tol and same >= agree
    q = cfg["quantization_config"]
    return ok, (f"{q['quant_method']} g{q.get('group_size')} rel {rel:.2e}, argmax agree "
                f"{same:.2f}, quantized modules {type(model.model.layers[0].mlp.down_proj).__name__}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--agree", type=float, default=0.9)
    ap.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu",
                    help="where HF runs the quantized model (the tools' CPU kernels on cpu)")
    ap.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default="float16")
    ap.add_argument("--torch-kernels", action="store_true",
                    help="gptqmodel's plain torch kernels (gptq_torch, torch_awq): any width")
    ap.add_argument("dir")
    args = ap.parse_args()
    failed = 0
    names = sorted(d for d in os.listdir(args.dir)
                   if os.path.exists(os.path.join(args.dir, d, "gannet_logits.safetensors")))
    if not names:
        sys.exit(f"{args.dir}: no exported checkpoints")
    for name in names:
        try:
            ok, what = check(os.path.join(args.dir, name), args.tol, args.agree, args.device,
                             getattr(torch, args.dtype),
                             {"gptq": "gptq_torch", "awq": "torch_awq"} if args.torch_kernels else None)
        except Exception as e:  # a loader that refuses the checkpoint is a failure too
            ok, what = False, f"{type(e).__name__}: {e}"
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: {what}", flush=True)
    print(f"{len(names) - failed}/{len(names)} checkpoints agree with HF")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
