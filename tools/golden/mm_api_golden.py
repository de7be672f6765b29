#!/usr/bin/env python3
"""Reference for images through gannet's public API: an image file and a chat, as a user gives
them, through HF's own processor (Gemma4Processor with the torchvision Gemma4ImageProcessor) and
the checkpoint's chat template, then Gemma4ForConditionalGeneration's greedy continuation.

Unlike mm_prompt_golden.py, which builds the expanded ids by hand from raw patches, this checks the
whole path a C ABI caller takes: bytes of a PNG, a {"type": "image"} content part rendered by the
chat template, the processor expanding `<|image|>` into boi + N soft tokens + eoi at a given
max_soft_tokens budget, and the model's answer.

Checkpoint: tests/data/tiny/mm-api, written here from tests/data/tiny/mm-31b: the same weights
but a position table of 64 rows instead of 16 (vision_config.position_embedding_size), because a
real image at the smallest budget (70 soft tokens, up to 630 patches) is more than 16 patches
wide; rows 16..63 are new (normal, std 0.02, seed 0). Saved in bf16 as make_multimodal_tiny.py
saves, then loaded as mm_prompt_golden.py loads (float32, eager, bf16-rounded embedding scales).
Image: tests/data/images/palette_50x30.png at 70 soft tokens.

Output: tests/data/golden/mm-api.json with the messages, max_soft_tokens, the processor's
input_ids (what the prompt must tokenize to) and greedy (16 ids, HF generate without sampling).

Usage: mm_api_golden.py [--tiny-dir tests/data/tiny] [--images tests/data/images]
                        [--out tests/data/golden]
Needs torch, transformers (tested with 5.17.0), torchvision and pillow.
"""
import argparse
import json
import os
import shutil
import sys

import torch
import transformers
from PIL import Image
from transformers import (Gemma4ForConditionalGeneration, Gemma4Processor,
                          PreTrainedTokenizerFast)
from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor
from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor
from transformers.models.gemma4.video_processing_gemma4 import Gemma4VideoProcessor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mm_prompt_golden import load  # noqa: E402

IMAGE = "palette_50x30.png"
MAX_SOFT_TOKENS = 70
NUM_GREEDY = 16
POSITIONS = 64
MESSAGES = [{"role": "user", "content": [{"type": "image"},
                                         {"type": "text", "text": "What is in this picture?"}]}]


def processor_for(model_dir):
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(model_dir, "tokenizer.json"),
                                  bos_token="<bos>", eos_token="<eos>", pad_token="<pad>")
    # The attributes Gemma4Processor reads from Gemma-4's tokenizer class.
    tok.image_token, tok.boi_token, tok.eoi_token = "<|image|>", "<|image>", "<image|>"
    tok.image_token_id = tok.convert_tokens_to_ids(tok.image_token)
    for name in ("audio_token", "boa_token", "eoa_token"):
        setattr(tok, name, "<unused>")
    tok.audio_token_id = -1
    with open(os.path.join(model_dir, "chat_template.jinja")) as f:
        template = f.read()
    # Audio and video parts are unused; the processor requires the objects.
    return Gemma4Processor(feature_extractor=Gemma4AudioFeatureExtractor(),
                           image_processor=Gemma4ImageProcessor(), tokenizer=tok,
                           video_processor=Gemma4VideoProcessor(), chat_template=template)


def write_checkpoint(tiny_dir):
    src, dst = os.path.join(tiny_dir, "mm-31b"), os.path.join(tiny_dir, "mm-api")
    model = Gemma4ForConditionalGeneration.from_pretrained(src, dtype=torch.float32).eval()
    emb = model.model.vision_tower.patch_embedder
    old = emb.position_embedding_table.data
    gen = torch.Generator().manual_seed(0)
    new = torch.randn(old.shape[0], POSITIONS, old.shape[2], generator=gen) * 0.02
    new[:, :old.shape[1]] = old
    emb.position_embedding_table = torch.nn.Parameter(new)
    emb.position_embedding_size = POSITIONS
    model.config.vision_config.position_embedding_size = POSITIONS
    os.makedirs(dst, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(dst, safe_serialization=True)
    if os.path.exists(os.path.join(dst, "generation_config.json")):
        os.remove(os.path.join(dst, "generation_config.json"))
    for name in ("tokenizer.json", "chat_template.jinja"):
        shutil.copy(os.path.join(src, name), dst)
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny-dir", default="tests/data/tiny")
    ap.add_argument("--images", default="tests/data/images")
    ap.add_argument("--out", default="tests/data/golden")
    args = ap.parse_args()
    model_dir = write_checkpoint(args.tiny_dir)
    processor = processor_for(model_dir)
    text = processor.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    image = Image.open(os.path.join(args.images, IMAGE))
    inputs = processor(text=text, images=[image], return_tensors="pt",
                       images_kwargs={"max_soft_tokens": MAX_SOFT_TOKENS},
                       add_special_tokens=False)
    model = load(model_dir)
    with torch.no_grad():
        gen = model.generate(**inputs, max_new_tokens=NUM_GREEDY, min_new_tokens=NUM_GREEDY,
                             do_sample=False)
    ids = inputs["input_ids"][0].tolist()
    out = {"transformers": transformers.__version__, "image": IMAGE,
           "max_soft_tokens": MAX_SOFT_TOKENS, "messages": MESSAGES, "prompt_text": text,
           "num_soft_tokens": ids.count(model.config.image_token_id), "input_ids": ids,
           "greedy": gen[0, len(ids):].tolist()}
    path = os.path.join(args.out, "mm-api.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{path}: {len(ids)} prompt ids ({out['num_soft_tokens']} soft), greedy {out['greedy']}")


if __name__ == "__main__":
    main()
