"""Builds small Gemma-style byte-fallback BPE tokenizers with HuggingFace `tokenizers`.

Shared by tools/tokenizer/make_parity_data.py (the parity fixtures) and
tools/train_tiny/train_tokenizer.py (the tiny trained Gemma-4's tokenizer).

The tokenizer mirrors what transformers' GemmaConverter writes (convert_slow_tokenizer.py):
normalizer Replace(" " -> "▁"), pre-tokenizer Split(" ", MergedWithPrevious), BPE with
byte_fallback and fuse_unk, decoder Sequence[Replace("▁" -> " "), ByteFallback, Fuse]. Gemma-4
special tokens sit at their real ids (docs/gemma4-model.md §5), "\\n" is the ordinary vocab
token 107, the other low ids are <unusedN> placeholders; then the 256 byte tokens <0x00>..<0xFF>,
Gemma's whitespace runs, and the trained pieces. The post-processor prepends <bos>.
"""

import json

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

# Gemma-4 special tokens at their real ids (docs/gemma4-model.md §5).
SPECIALS = {
    0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 5: "[multimodal]",
    46: "<|tool>", 47: "<tool|>", 48: "<|tool_call>", 49: "<tool_call|>",
    50: "<|tool_response>", 51: "<tool_response|>", 52: '<|"|>', 98: "<|think|>",
    100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>",
}
NEWLINE_ID = 107

# Whitespace runs as Gemma has them, reachable through the extra merges below.
_EXTRA = ["▁", "\t", "▁▁", "▁▁▁▁", "\n\n", "\n\n\n\n"]
_EXTRA_MERGES = [("▁", "▁"), ("▁▁", "▁▁"), ("\n", "\n"), ("\n\n", "\n\n")]
# Ids below the trained pieces: specials and placeholders, "\n", 256 bytes, room for _EXTRA.
RESERVED = NEWLINE_ID + 1 + 256 + 8


def train(lines, vocab_size):
    """Trains merges within "▁word" pieces (like SentencePiece); returns (vocab list, merges).

    Asks the trainer for vocab_size - RESERVED pieces (alphabet included), so a tokenizer built
    from them has about vocab_size ids; build_tokenizer(..., vocab_size=) makes that exact.
    """
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - RESERVED, min_frequency=2,
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(lines, trainer)
    model = json.loads(tok.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    return [t for t, _ in by_id], [tuple(m) for m in model["merges"]]


def build_tokenizer(trained_vocab, trained_merges, vocab_size=None):
    """The full tokenizer: fixed low ids, then trained_vocab in order.

    vocab_size: if set, exactly that many ids. Trained pieces past it are dropped with the merges
    that make or use them (trainer order is merge order, so this keeps a prefix of the merges).
    """
    vocab = {}
    for i in range(NEWLINE_ID):
        vocab[SPECIALS.get(i, f"<unused{i}>")] = i
    vocab["\n"] = NEWLINE_ID
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for t in _EXTRA + trained_vocab:
        if vocab_size is not None and len(vocab) == vocab_size:
            break
        if t not in vocab:
            vocab[t] = len(vocab)
    if vocab_size is not None and len(vocab) != vocab_size:
        raise ValueError(f"only {len(vocab)} ids for vocab_size {vocab_size}: train on more text")
    merges = list(trained_merges)
    if vocab_size is not None:
        merges = [m for m in merges if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    merges += _EXTRA_MERGES
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                               fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", 2)])
    added = []
    for i in range(NEWLINE_ID):
        if i in SPECIALS:
            added.append(AddedToken(SPECIALS[i], special=True, normalized=False))
        else:
            # Non-special placeholders: still never split, but kept by skip_special_tokens.
            added.append(AddedToken(f"<unused{i}>", special=False, normalized=False))
    tok.add_tokens(added)
    return tok
