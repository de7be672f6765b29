#!/usr/bin/env python3
"""Checks that gannet's C++ tokenizer (through the C ABI, libgannet.so) agrees with HuggingFace on
a folder written by train_tokenizer.py: token ids (with and without <bos>) and decoded text for
held-out lines and chat-formatted strings, and the chat prompt gannet renders against
transformers' apply_chat_template with the folder's chat_template.jinja. Prints the held-out
characters per token. Exits 1 on any difference.

gannet_tokenizer_open reads config.json next to tokenizer.json (the model's size class picks the
chat template's generation prompt), so the tokenizer files are paired here with a tiny test
config of the matching --variant.

Usage (after train_tokenizer.py; ninja -C build/dev libgannet.so):
  python3 tools/train_tiny/check_tokenizer.py --tok /tmp/tiny_tok --corpus /tmp/corpus
"""

import argparse
import ctypes
import os
import shutil
import sys
import tempfile

from tokenizers import Tokenizer

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Message(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("role", ctypes.c_char_p),
                ("content", ctypes.c_char_p)]


class Gannet:
    def __init__(self, lib, model_dir):
        self.lib = ctypes.CDLL(lib)
        self.lib.gannet_last_error_message.restype = ctypes.c_char_p
        self.tok = ctypes.c_void_p()
        self.check(self.lib.gannet_tokenizer_open(model_dir.encode(), ctypes.byref(self.tok)))

    def check(self, status):
        if status != 0:
            raise RuntimeError(self.lib.gannet_last_error_message().decode())

    def call(self, fn, ctype, *args):
        """The C ABI's buffer rule: a size query with a NULL buffer, then the call."""
        n = ctypes.c_size_t()
        self.check(fn(self.tok, *args, None, ctypes.c_size_t(0), ctypes.byref(n)))
        buf = (ctype * (n.value + 1))()
        self.check(fn(self.tok, *args, buf, ctypes.c_size_t(n.value + 1), ctypes.byref(n)))
        return buf, n.value

    def encode(self, text, add_special):
        b = text.encode()
        buf, n = self.call(self.lib.gannet_tokenize, ctypes.c_int32, b, ctypes.c_size_t(len(b)),
                           ctypes.c_int32(add_special))
        return list(buf[:n])

    def decode(self, ids):
        arr = (ctypes.c_int32 * len(ids))(*ids)
        buf, n = self.call(self.lib.gannet_detokenize, ctypes.c_char, arr,
                           ctypes.c_size_t(len(ids)), ctypes.c_int32(0))
        return buf.raw[:n].decode()

    def chat(self, messages, add_generation_prompt, enable_thinking):
        arr = (Message * len(messages))(*[Message(ctypes.sizeof(Message), m["role"].encode(),
                                                  m["content"].encode()) for m in messages])
        buf, n = self.call(self.lib.gannet_apply_chat_template, ctypes.c_char, arr,
                           ctypes.c_size_t(len(messages)), ctypes.c_int32(add_generation_prompt),
                           ctypes.c_int32(enable_thinking))
        return buf.raw[:n].decode()


CONVERSATIONS = [
    [{"role": "user", "content": "Who wrote the book of Revelation?"}],
    [{"role": "system", "content": "Answer in the words of the King James Bible."},
     {"role": "user", "content": "What is love?"},
     {"role": "assistant", "content": "Charity suffereth long, and is kind."},
     {"role": "user", "content": "  And faith?\n"}],
    [{"role": "user", "content": "Say “hello” — twice.\n\nThanks"},
     {"role": "assistant", "content": "<|channel>thought\nhm<channel|>Hello, hello."}],
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tok", required=True, help="train_tokenizer.py's --out")
    ap.add_argument("--corpus", required=True, help="fetch_corpus.sh's OUTDIR")
    ap.add_argument("--lib", default=os.path.join(REPO, "build", "dev", "lib", "capi",
                                                  "libgannet.so"))
    ap.add_argument("--variant", choices=["large", "small"], default="large",
                    help="as given to train_tokenizer.py")
    ap.add_argument("--lines", type=int, default=25, help="held-out lines per translation")
    args = ap.parse_args()

    model_dir = tempfile.mkdtemp()
    try:
        tiny = "31b" if args.variant == "large" else "e2b"
        shutil.copy(os.path.join(REPO, "tests", "data", "tiny", tiny, "config.json"), model_dir)
        shutil.copy(os.path.join(args.tok, "tokenizer.json"), model_dir)
        g = Gannet(args.lib, model_dir)
    finally:
        shutil.rmtree(model_dir)
    hf = Tokenizer.from_file(os.path.join(args.tok, "tokenizer.json"))

    texts, chars, tokens = [], 0, 0
    for name in ("heldout_kjv.txt", "heldout_web.txt"):
        with open(os.path.join(args.corpus, name), encoding="utf-8") as f:
            text = f.read()
        texts += [line for line in text.split("\n") if line][: args.lines]
        chars += len(text)
        tokens += len(g.encode(text, 0))
    try:
        from transformers import AutoTokenizer
        auto = AutoTokenizer.from_pretrained(args.tok)
    except ImportError:
        auto = None
        print("transformers not installed: chat prompts compared by gannet's rendering only")
    chats = []
    for conv in CONVERSATIONS:
        for gen, think in ((1, 0), (0, 0), (1, 1)):
            prompt = g.chat(conv, gen, think)
            if auto is not None:
                want = auto.apply_chat_template(conv, tokenize=False, add_generation_prompt=gen,
                                                enable_thinking=bool(think))
                if prompt != want:
                    sys.exit(f"chat prompt differs:\n gannet {prompt!r}\n HF     {want!r}")
            chats.append(prompt)
    texts += chats + ["<|turn>user\nHi<turn|>\n", "Café 日本 😀 \t two  spaces\n\n\n", ""]

    bad = 0
    for t in texts:
        for special in (1, 0):
            want = hf.encode(t, add_special_tokens=bool(special)).ids
            got = g.encode(t, special)
            if got != want:
                bad += 1
                print(f"ids differ (add_special_tokens={special}) for {t[:60]!r}:\n"
                      f"  gannet {got[:20]}\n  HF     {want[:20]}")
        ids = hf.encode(t, add_special_tokens=False).ids
        if g.decode(ids) != hf.decode(ids, skip_special_tokens=False):
            bad += 1
            print(f"decode differs for {t[:60]!r}")
    print(f"{len(texts)} strings ({len(chats)} chat prompts): "
          f"{'all agree' if bad == 0 else f'{bad} differences'}; "
          f"held-out {chars / tokens:.3f} chars/token ({chars} chars, {tokens} tokens)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
