#!/usr/bin/env python3
"""HF transformers' answers for the trained tiny model (tests/parity/trained_tiny_test.cc).

Loads the committed folders the way a user would (`from_pretrained`, AutoTokenizer), so it also
proves HF reads what train.py wrote, and writes tests/data/golden/trained.safetensors:
  <passage>.input_ids   [N]      the first N tokens of a held-out text (kjv, web), chapters each
                                 opened by <bos> as in training;
                                 N = 640 = 5 sliding windows
  <passage>.nll         [N-1]    HF's per-token negative log-likelihood (fp32 model)
  <passage>.positions   [R]      positions whose logits are kept: every 32nd and the last
  <passage>.logits      [R, V]   HF's logits there (past the window from position 128 on)
  prompt<i>.text_utf8   [bytes]  ten prompts, as UTF-8 bytes (so the test can tokenize them)
  prompt<i>.input_ids   [n]      the same tokenized by HF's tokenizer (with <bos>)
  prompt<i>.greedy      [32]     HF's greedy continuation (KV cache on, no stop tokens)
Also prints the passages' perplexities, which the test checks gannet against (1e-3 relative), and
checks that HF's assisted generation with the trained assistant (loaded by from_pretrained) gives
the greedy tokens.

Usage: python3 tools/train_tiny/make_goldens.py --corpus .corpus   (--model tests/data/tiny/trained)
"""

import argparse
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import AutoTokenizer, Gemma4ForCausalLM
from transformers.models.gemma4_assistant.modeling_gemma4_assistant import Gemma4AssistantForCausalLM

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PASSAGE_LEN = 640
KEEP_EVERY = 32
GREEDY_TOKENS = 32
PROMPTS = [
    "In the beginning",
    "And God said",
    "The LORD is my shepherd",
    "Blessed are the",
    "Now the serpent was",
    "Jesus answered and said unto them,",
    "And it came to pass, when the king heard",
    "For God so loved the world",
    "The word of the LORD came to",
    "Then Peter said",
]


@torch.no_grad()
def passage(model, tok, text):
    # Chapters joined as train.py streams them: each starts with <bos>.
    ids = []
    for chapter in (c.strip("\n") for c in text.split("\n\n") if c.strip()):
        ids += [tok.bos_token_id] + tok(chapter, add_special_tokens=False)["input_ids"]
        if len(ids) >= PASSAGE_LEN:
            break
    ids = ids[:PASSAGE_LEN]
    if len(ids) < PASSAGE_LEN:
        raise SystemExit(f"held-out text gives only {len(ids)} tokens")
    x = torch.tensor([ids])
    logits = model(input_ids=x, use_cache=False).logits[0].float()
    nll = F.cross_entropy(logits[:-1], x[0, 1:], reduction="none")
    positions = list(range(0, PASSAGE_LEN, KEEP_EVERY)) + [PASSAGE_LEN - 1]
    return {"input_ids": x[0], "nll": nll, "positions": torch.tensor(positions),
            "logits": logits[positions]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(REPO, "tests", "data", "tiny", "trained"))
    ap.add_argument("--draft", default=None, help="assistant folder (default: <model>-assistant)")
    ap.add_argument("--corpus", required=True, help="fetch_corpus.sh output (held-out files)")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "golden",
                                                  "trained.safetensors"))
    args = ap.parse_args()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = Gemma4ForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                              attn_implementation="eager").eval()
    # HF keeps the embedding scale sqrt(hidden) in the model's dtype: bf16 (13.875 here) when the
    # checkpoint runs in bf16, as gannet does and as train.py trained it; fp32 would give 13.856.
    h = model.config.hidden_size
    model.model.embed_tokens.embed_scale.fill_(
        torch.tensor(h ** 0.5, dtype=torch.float32).to(torch.bfloat16).item())
    drafter = Gemma4AssistantForCausalLM.from_pretrained(
        args.draft or args.model.rstrip("/") + "-assistant", dtype=torch.float32,
        attn_implementation="eager").eval()
    out = {}
    for name in ("kjv", "web"):
        with open(os.path.join(args.corpus, f"heldout_{name}.txt"), encoding="utf-8") as f:
            r = passage(model, tok, f.read())
        for k, v in r.items():
            out[f"{name}.{k}"] = v
        print(f"{name}: perplexity {math.exp(r['nll'].mean().item()):.6f} over {PASSAGE_LEN - 1} "
              f"tokens; past the window: {math.exp(r['nll'][128:].mean().item()):.6f}")
    for i, p in enumerate(PROMPTS):
        ids = tok(p, return_tensors="pt")["input_ids"]
        if ids[0, 0].item() != tok.bos_token_id:
            raise SystemExit("the tokenizer does not add <bos>")
        g = model.generate(ids, max_new_tokens=GREEDY_TOKENS, min_new_tokens=GREEDY_TOKENS,
                           do_sample=False, eos_token_id=None, pad_token_id=0)
        # HF's own assisted generation with the trained assistant: greedy, so the same tokens.
        a = model.generate(ids, max_new_tokens=GREEDY_TOKENS, min_new_tokens=GREEDY_TOKENS,
                           do_sample=False, eos_token_id=None, pad_token_id=0,
                           assistant_model=drafter)
        if not torch.equal(a[0, :g.shape[1]], g[0]):
            raise SystemExit(f"prompt{i}: HF assisted generation differs from greedy")
        out[f"prompt{i}.text_utf8"] = torch.tensor(list(p.encode("utf-8")))
        out[f"prompt{i}.input_ids"] = ids[0]
        out[f"prompt{i}.greedy"] = g[0, ids.shape[1]:]
        print(f"prompt{i}: {p!r} -> {tok.decode(g[0, ids.shape[1]:])!r}")
    out = {k: (v.to(torch.int64) if not v.is_floating_point() else v.to(torch.float32)).contiguous()
           for k, v in out.items()}
    save_file(out, args.out)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
