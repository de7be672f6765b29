#!/usr/bin/env python3
"""Trains the tiny Gemma-4 that `make demo` runs, and its MTP assistant (drafter).

Why: random weights print noise and make speculative acceptance and quantization error
meaningless. This recipe trains a model with the real Gemma-4 text architecture (sliding and full
layers, head_dim 256 and 512, K=V full layers, final-logit softcap, the 5:1-style layer pattern cut
to 4 layers) on public-domain text, then trains its `gemma4_assistant` drafter against the frozen
target with the MTP objective through HF's own modules (Gemma4AssistantForCausalLM).

Inputs: the corpus written by fetch_corpus.sh and the tokenizer folder of train_tokenizer.py.
Outputs (HF checkpoint folders that gannet and transformers both load, bf16 safetensors):
  OUT/trained/                config.json (gemma4_text, Gemma4ForCausalLM), model.safetensors,
                              tokenizer files copied from --tokenizer
  OUT/trained-assistant/      config.json (gemma4_assistant), model.safetensors
  OUT/train_log.json          losses, held-out perplexity, acceptance, timings

Everything is seeded; on the same GPU and software the run repeats to the last bit except for
the nondeterministic reductions of cuBLAS/SDPA backward (the quality numbers repeat to ~1%).

Usage (GPU machine, ~6 minutes on one H200):
  python3 tools/train_tiny/train.py --corpus .corpus --tokenizer .corpus/tok --out /tmp/tiny
"""

import argparse
import json
import math
import os
import shutil
import time

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoTokenizer, Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM
from transformers.models.gemma4_assistant.configuration_gemma4_assistant import Gemma4AssistantConfig
from transformers.models.gemma4_assistant.modeling_gemma4_assistant import Gemma4AssistantForCausalLM

BOS, EOS, PAD = 2, 1, 0
SOURCES = ("kjv", "web")

# Sized so both checkpoints together stay under 10 MB in bf16 (checked in main()).
WINDOW = 128          # sliding window; training sequences are 4 windows long
SEQ = 512
TARGET = dict(
    vocab_size=4096, hidden_size=192, intermediate_size=640, num_hidden_layers=4,
    num_attention_heads=2, num_key_value_heads=1, num_global_key_value_heads=1,
    head_dim=256, global_head_dim=512, attention_k_eq_v=True,
    hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192, rms_norm_eps=1e-6,
    pad_token_id=PAD, eos_token_id=[EOS, 106], bos_token_id=BOS, tie_word_embeddings=True,
    rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                     "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                        "rope_theta": 1000000.0}},
    attention_bias=False, attention_dropout=0.0, sliding_window=WINDOW,
    layer_types=["sliding_attention"] * 3 + ["full_attention"],
    final_logit_softcapping=30.0, use_bidirectional_attention="vision",
    vocab_size_per_layer_input=0, hidden_size_per_layer_input=0, num_kv_shared_layers=0,
    enable_moe_block=False, use_double_wide_mlp=False)
# The drafter: q-only layers over the target's last sliding and last full KV (all layers shared).
DRAFTER_TEXT = dict(TARGET, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                    layer_types=["sliding_attention", "full_attention"], num_kv_shared_layers=2,
                    final_logit_softcapping=None)
CHAT_EXAMPLES = 4000             # chat-formatted examples mixed into the prose (~18% of tokens)
DRAFT_STEPS = 3                  # MTP steps unrolled in training (the engine drafts K = 3)
DRAFT_STEP_WEIGHTS = (1.0, 0.8, 0.6)


def load_stream(corpus, tok, name):
    """One token stream per file: every chapter (blank-line separated) starts with <bos>."""
    with open(os.path.join(corpus, name), encoding="utf-8") as f:
        chapters = [c.strip("\n") for c in f.read().split("\n\n") if c.strip()]
    ids = []
    for enc in tok.encode_batch(chapters, add_special_tokens=False):
        ids.append(BOS)
        ids.extend(enc.ids)
    return np.asarray(ids, dtype=np.int64)


def chat_stream(corpus, tok, hf_tok, rng, count=CHAT_EXAMPLES):
    """Chats made of scripture, so the model learns the Gemma-4 chat format (turn markers, the
    empty thought channel of the generation prompt, ending its answer with <turn|>): a user turn
    holds a verse, the model answers with the next one; half the chats have a second exchange.
    Each is rendered by the folder's own chat template exactly as inference renders it: history
    plus generation prompt, then the answer and <turn|>."""
    chapters = []
    for name in SOURCES:
        with open(os.path.join(corpus, f"{name}.txt"), encoding="utf-8") as f:
            chapters += [c.split("\n") for c in f.read().split("\n\n") if c.count("\n") >= 4]
    texts = []
    for _ in range(count):
        verses = chapters[rng.integers(len(chapters))]
        exchanges = 1 + int(rng.integers(2))
        i = int(rng.integers(len(verses) - 2 * exchanges + 1))
        msgs = []
        for e in range(exchanges):
            msgs.append({"role": "user", "content": verses[i + 2 * e]})
            if e + 1 < exchanges:
                msgs.append({"role": "assistant", "content": verses[i + 2 * e + 1]})
        prompt = hf_tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        texts.append(prompt + verses[i + 2 * exchanges - 1] + "<turn|>\n")
    ids = [t for enc in tok.encode_batch(texts, add_special_tokens=False) for t in enc.ids]
    return np.asarray(ids, dtype=np.int64)


def batches(stream, batch, seq, rng):
    """Random windows of seq + 1 tokens (inputs and shifted labels)."""
    while True:
        starts = rng.integers(0, len(stream) - seq - 1, size=batch)
        yield torch.from_numpy(np.stack([stream[s:s + seq + 1] for s in starts]))


def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))))


def bf16_round(x):
    return torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).item()


def make_target():
    config = Gemma4TextConfig(**TARGET)
    config._attn_implementation = "sdpa"
    model = Gemma4ForCausalLM(config)
    # gannet (like the bf16 checkpoints HF ships) multiplies embeddings by sqrt(hidden) rounded to
    # bf16; train with that value so fp32 training and bf16 inference see the same scale.
    model.model.embed_tokens.embed_scale.fill_(bf16_round(config.hidden_size ** 0.5))
    return model, config


def make_drafter():
    config = Gemma4AssistantConfig(text_config=dict(DRAFTER_TEXT), backbone_hidden_size=TARGET["hidden_size"],
                                   use_ordered_embeddings=False, tie_word_embeddings=True)
    config._attn_implementation = "sdpa"
    config.get_text_config()._attn_implementation = "sdpa"
    return Gemma4AssistantForCausalLM(config), config


@torch.no_grad()
def eval_ppl(model, stream, device, seq=SEQ, max_windows=64):
    model.eval()
    nll, count = 0.0, 0
    for s in range(0, min(len(stream) - 1, max_windows * seq), seq):
        x = torch.from_numpy(stream[s:s + seq + 1]).unsqueeze(0).to(device)
        if x.shape[1] < 2:
            break
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits.float()
        nll += F.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        count += x.shape[1] - 1
    model.train()
    return math.exp(nll / count)


def train_target(model, train, heldout, args, log):
    device = args.device
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=device == "cuda")
    rng = np.random.default_rng(args.seed)
    gen = batches(train, args.batch, SEQ, rng)
    model.train()
    t0 = time.time()
    for step in range(args.target_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.target_steps, args.lr, args.warmup)
        x = next(gen).to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 200 == 0 or step == args.target_steps - 1:
            msg = {"step": step, "loss": round(loss.item(), 4), "s": round(time.time() - t0, 1)}
            if step % 400 == 0 or step == args.target_steps - 1:
                msg["heldout_ppl"] = round(eval_ppl(model, heldout, device), 3)
            print("target", msg, flush=True)
            log["target"].append(msg)
    return time.time() - t0


def draft_masks(q_len, k_len, window, device):
    """Query i is the draft for position i + 1 made after the target committed 0..i: it sees keys
    j <= i (full) and the last `window` of them (sliding), as the engine and HF's one-step
    reference do (the drafter's RoPE position is i + 1 for every step of a round)."""
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    full = j <= i
    sliding = full & (j >= i + 1 - window)
    return {"full_attention": full[None, None], "sliding_attention": sliding[None, None]}


def target_pass(target, x):
    """The frozen target over x: post-norm hidden states, the KV the drafter reads, and the
    target's next-token distribution at every position (the drafter's soft labels)."""
    with torch.no_grad():
        out = target.model(input_ids=x, return_shared_kv_states=True, use_cache=False)
        h = out.last_hidden_state
        cap = target.config.final_logit_softcapping
        logits = torch.tanh(target.lm_head(h).float() / cap) * cap
        return h, dict(out.shared_kv_states), logits


def draft_forward(drafter, target, x, masks, hidden, shared):
    """MTP rounds for every position of x at once: returns per-step logits [B, T-1, V]."""
    hidden = hidden[:, :-1]                              # h_i, post final norm
    T = x.shape[1]
    positions = torch.arange(1, T, device=x.device)[None].expand(x.shape[0], -1)
    logits = []
    for k in range(DRAFT_STEPS):
        tokens = x[:, torch.clamp(torch.arange(k + 1, T + k, device=x.device), max=T - 1)]
        embeds = torch.cat([target.model.embed_tokens(tokens), hidden], dim=-1)
        h = drafter.model(inputs_embeds=drafter.pre_projection(embeds), attention_mask=masks,
                          position_ids=positions, shared_kv_states=shared).last_hidden_state
        logits.append(drafter.lm_head(h))
        hidden = drafter.post_projection(h)
    return logits


def draft_loss(logits, target_logits):
    """Distillation: cross-entropy against the target's own distribution for the same token,
    which is what acceptance measures (the target's choice, not the corpus's)."""
    T = target_logits.shape[1]
    total, per_step = 0.0, []
    for k, (lg, w) in enumerate(zip(logits, DRAFT_STEP_WEIGHTS)):
        n = T - 2 - k                        # query i drafts token i + k + 2: target row i + k + 1
        soft = torch.softmax(target_logits[:, k + 1:k + 1 + n], dim=-1)
        loss = F.cross_entropy(lg[:, :n].float().reshape(-1, lg.shape[-1]),
                               soft.reshape(-1, soft.shape[-1]))
        total = total + w * loss
        per_step.append(round(loss.item(), 4))
    return total, per_step


def train_drafter(drafter, target, train, args, log):
    device = args.device
    target.eval()
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=device == "cuda")
    rng = np.random.default_rng(args.seed + 1)
    gen = batches(train, args.batch, SEQ, rng)
    masks = draft_masks(SEQ, SEQ + 1, WINDOW, device)
    drafter.train()
    t0 = time.time()
    for step in range(args.draft_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.draft_steps, args.lr, args.warmup)
        x = next(gen).to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            hidden, shared, target_logits = target_pass(target, x)
            loss, per_step = draft_loss(draft_forward(drafter, target, x, masks, hidden, shared),
                                        target_logits)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        if step % 200 == 0 or step == args.draft_steps - 1:
            msg = {"step": step, "loss": per_step, "s": round(time.time() - t0, 1)}
            print("drafter", msg, flush=True)
            log["drafter"].append(msg)
    return time.time() - t0


@torch.no_grad()
def draft_agreement(drafter, target, stream, device, windows=16):
    """Teacher-forced agreement of the drafter's greedy token with the target's greedy token at
    each MTP step on held-out text: an estimate of greedy acceptance, before the engine's own."""
    drafter.eval()
    target.eval()
    masks = draft_masks(SEQ, SEQ + 1, WINDOW, device)
    agree = [0] * DRAFT_STEPS
    count = [0] * DRAFT_STEPS
    for s in range(0, min(len(stream) - SEQ - 1, windows * SEQ), SEQ):
        x = torch.from_numpy(stream[s:s + SEQ + 1]).unsqueeze(0).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            hidden, shared, target_logits = target_pass(target, x)
            target_next = target_logits.argmax(-1)[0]             # the target's greedy choices
            logits = draft_forward(drafter, target, x, masks, hidden, shared)
        for k, lg in enumerate(logits):
            n = x.shape[1] - 2 - k
            agree[k] += (lg[0, :n].argmax(-1) == target_next[k + 1:k + 1 + n]).sum().item()
            count[k] += n
    drafter.train()
    return [round(a / c, 4) for a, c in zip(agree, count)]


def save_bf16(model, path, skip=("lm_head.weight",)):
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items() if k not in skip}
    state = {k: (v if k.endswith("token_ordering") else v.to(torch.bfloat16)).contiguous()
             for k, v in state.items()}
    save_file(state, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    return sum(v.numel() * v.element_size() for v in state.values())


def write_config(path, cfg):
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json (+ chat template)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--target-steps", type=int, default=1200)
    ap.add_argument("--draft-steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    chats = chat_stream(args.corpus, tok, AutoTokenizer.from_pretrained(args.tokenizer),
                        np.random.default_rng(args.seed + 2))
    train = np.concatenate([load_stream(args.corpus, tok, f"{s}.txt") for s in SOURCES] + [chats])
    heldout = {s: load_stream(args.corpus, tok, f"heldout_{s}.txt") for s in SOURCES}
    print(f"train tokens {len(train)} ({len(chats)} in chats), held-out tokens "
          f"{ {s: len(v) for s, v in heldout.items()} }", flush=True)
    log = {"args": vars(args), "train_tokens": int(len(train)), "target": [], "drafter": []}

    target, tconfig = make_target()
    target.to(args.device)
    log["target_seconds"] = train_target(target, train, heldout["web"], args, log)
    log["heldout_ppl"] = {s: eval_ppl(target, v, args.device) for s, v in heldout.items()}
    print("held-out perplexity", log["heldout_ppl"], flush=True)

    drafter, dconfig = make_drafter()
    drafter.to(args.device)
    log["drafter_seconds"] = train_drafter(drafter, target, train, args, log)
    log["draft_agreement"] = {s: draft_agreement(drafter, target, v, args.device)
                              for s, v in heldout.items()}
    print("teacher-forced draft agreement per step", log["draft_agreement"], flush=True)

    tdir = os.path.join(args.out, "trained")
    ddir = os.path.join(args.out, "trained-assistant")
    for d in (tdir, ddir):
        os.makedirs(d, exist_ok=True)
    tcfg = dict(TARGET, model_type="gemma4_text", architectures=["Gemma4ForCausalLM"],
                torch_dtype="bfloat16")
    write_config(tdir, tcfg)
    dcfg = {"model_type": "gemma4_assistant", "architectures": ["Gemma4AssistantForCausalLM"],
            "text_config": dict(DRAFTER_TEXT, model_type="gemma4_text"),
            "backbone_hidden_size": TARGET["hidden_size"], "use_ordered_embeddings": False,
            "num_centroids": 2048, "centroid_intermediate_top_k": 32, "tie_word_embeddings": True,
            "torch_dtype": "bfloat16"}
    write_config(ddir, dcfg)
    for name in os.listdir(args.tokenizer):
        shutil.copy(os.path.join(args.tokenizer, name), tdir)
    sizes = {"target_bytes": save_bf16(target, tdir), "drafter_bytes": save_bf16(drafter, ddir)}
    log.update(sizes)
    total = sizes["target_bytes"] + sizes["drafter_bytes"]
    print(f"weights: target {sizes['target_bytes']} B, drafter {sizes['drafter_bytes']} B, "
          f"total {total} B", flush=True)
    if total > 10 * 1000 * 1000:
        raise SystemExit("the two checkpoints exceed 10 MB")
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(log, f, indent=1)


if __name__ == "__main__":
    main()
