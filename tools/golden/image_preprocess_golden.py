#!/usr/bin/env python3
"""Reference dumps for gannet's image preprocessing (lib/vision), computed with HF transformers'
Gemma-4 processor: the torchvision-backed Gemma4ImageProcessor, which AutoImageProcessor and
Gemma4Processor pick by default whenever torchvision is installed.

It writes small test images of every kind the decoder accepts (PNG: RGB, RGBA, palette with a
transparent entry, grey, grey+alpha, 16-bit RGB, 16-bit grey; JPEG colour and grey; WebP lossy and
lossless with alpha; odd, tall, wide and no-resize sizes) to tests/data/images/, opens each with
PIL.Image.open exactly as a user would before calling the processor, and records per image and
soft-token budget what the processor produced. It records the transformers version it ran: 5.17
drops alpha (PIL's convert("RGB")), later versions composite it on white, so a dump made with
another version differs on the alpha cases.

pixel_values are stored compactly and losslessly: the script checks that every real patch value is
rescale_table[u] for a uint8 u (HF multiplies the resized uint8 image by 1/255 in float32) and that
every padding value is 0, then saves the resized uint8 image (the patches put back on their grid)
as an 8-bit RGB PNG, tests/data/images/golden/<case>_<tokens>.png. The processor's own RGB
conversion of each input (before resizing) is saved the same way as decoded_<case>.png, so
decoding and resizing are checked separately.

Output (tests/data/images/):
  <inputs>                      the test images
  golden/decoded_<case>.png     the processor's RGB conversion of the input (process_image);
                                not for the two largest inputs (checked via their resizes)
  golden/<case>_<tokens>.png    the processor's resized image, recovered from pixel_values
  image_golden.json             "decode_only": inputs with decoded_<name>.png alone (more JPEG
                                and PNG kinds); per case: file, tokens, target size, patch and soft-token counts;
                                the rescale table (256 float32 values); "layout": one case's
                                first 12 pixel_values rows as uint8 (value * 255) and its whole
                                image_position_ids, to pin the order inside a patch, the grid
                                order and the padding; "target_sizes": [h, w, tokens, target h,
                                target w] from HF's size rule for extreme shapes; prompt-expansion cases (token ids,
                                unexpanded and expanded ids, mm_token_type_ids)

Usage: image_preprocess_golden.py [--out tests/data/images]
Needs torch, torchvision, transformers (tested with 5.17.0) and pillow.
"""
import argparse
import io
import json
import os
import struct
import zlib

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import PreTrainedTokenizerFast
from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor
from transformers.models.gemma4.image_processing_gemma4 import (Gemma4ImageProcessor,
                                                                 get_aspect_ratio_preserving_size)
from transformers.models.gemma4.processing_gemma4 import Gemma4Processor
from transformers.models.gemma4.video_processing_gemma4 import Gemma4VideoProcessor

PATCH = 16
POOL = 3
LAYOUT_ROWS = 12  # patch rows kept in layout.safetensors: enough to pin the (py, px, c) order


def smooth(h, w, seed, noise=0.0):
    """A smooth colour pattern (compresses well) with optional noise; uint8 [h, w, 3]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / max(w, 1) * 6.3 + seed)
    g = 127.5 + 127.5 * np.cos(y / max(h, 1) * 4.1 + 0.5 * seed)
    b = 255.0 * ((x + y) % 64) / 63.0
    img = np.stack([r, g, b], -1)
    # A few hard edges: the resize's ringing (negative lobes, clamping) must be exercised.
    img[h // 4:h // 2, w // 3:(2 * w) // 3] = [250, 10, 128]
    if noise:
        img = img + rng.normal(0, noise, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(w, h, bit_depth, colour_type, rows):
    """A PNG written by hand: PIL cannot write 16-bit RGB."""
    raw = b"".join(b"\x00" + r for r in rows)
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw, 9))
            + png_chunk(b"IEND", b""))


def adam7_png(img):
    """An Adam7-interlaced 8-bit RGB PNG written by hand: PIL cannot write interlaced PNGs."""
    h, w, _ = img.shape
    raw = b""
    for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                           (1, 0, 2, 2), (0, 1, 1, 2)):
        sub = img[y0::dy, x0::dx]
        if sub.shape[0] and sub.shape[1]:
            raw += b"".join(b"\x00" + row.tobytes() for row in sub)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw, 9))
            + png_chunk(b"IEND", b""))


def save_pil(img, path, **kw):
    buf = io.BytesIO()
    img.save(buf, **kw)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def make_inputs(out):
    """Writes the test images; returns [(case, file name)]."""
    cases = []

    def add(case, name):
        cases.append((case, name))
        return os.path.join(out, name)

    save_pil(Image.fromarray(smooth(91, 37, 1, noise=6)), add("rgb_37x91", "rgb_37x91.png"), format="PNG")
    rgba = np.dstack([smooth(48, 64, 2), np.tile(np.linspace(0, 255, 64).astype(np.uint8), (48, 1))])
    save_pil(Image.fromarray(rgba, "RGBA"), add("rgba_64x48", "rgba_64x48.png"), format="PNG")
    pal = Image.fromarray(smooth(30, 50, 3)).quantize(colors=16)
    pal.info["transparency"] = 3
    save_pil(pal, add("palette_50x30", "palette_50x30.png"), format="PNG", transparency=3)
    save_pil(Image.fromarray(smooth(20, 33, 4)[..., 1]), add("grey_33x20", "grey_33x20.png"), format="PNG")
    la = np.dstack([smooth(20, 20, 5)[..., 0], smooth(20, 20, 6)[..., 2]])
    save_pil(Image.fromarray(la, "LA"), add("grey_alpha_20x20", "grey_alpha_20x20.png"), format="PNG")
    # 16-bit: PIL keeps the high byte of colour samples, and clips 16-bit grey to 255 (mode I;16).
    rng = np.random.default_rng(7)
    v16 = smooth(10, 12, 14).astype(np.uint16) * 256 + rng.integers(0, 256, (10, 12, 3), dtype=np.uint16)
    with open(add("rgb16_12x10", "rgb16_12x10.png"), "wb") as f:
        f.write(raw_png(12, 10, 16, 2, [v16[i].astype(">u2").tobytes() for i in range(10)]))
    g16 = rng.integers(0, 600, (9, 11), dtype=np.uint16)
    with open(add("grey16_11x9", "grey16_11x9.png"), "wb") as f:
        f.write(raw_png(11, 9, 16, 0, [g16[i].astype(">u2").tobytes() for i in range(9)]))
    save_pil(Image.fromarray(smooth(300, 20, 8)), add("tall_20x300", "tall_20x300.png"), format="PNG")
    save_pil(Image.fromarray(smooth(30, 500, 9)), add("wide_500x30", "wide_500x30.png"), format="PNG")
    # 480 x 336 at 70 soft tokens is already the target size: the processor skips the resize.
    save_pil(Image.fromarray(smooth(336, 480, 10)), add("noresize_480x336", "noresize_480x336.png"),
             format="PNG")
    # Shrinking in both directions (the antialias widens the filter): at 70 and 280 tokens.
    save_pil(Image.fromarray(smooth(700, 900, 16)), add("shrink_900x700", "shrink_900x700.png"),
             format="PNG")
    save_pil(Image.fromarray(smooth(480, 640, 11)), add("photo_640x480", "photo_640x480.jpg"),
             format="JPEG", quality=85)
    save_pil(Image.fromarray(smooth(60, 45, 12)[..., 0]), add("grey_45x60", "grey_45x60.jpg"),
             format="JPEG", quality=90)
    # Small colour JPEG (4:2:0 chroma): its decode is kept whole; the photo's is not (size).
    save_pil(Image.fromarray(smooth(40, 52, 15, noise=3)), add("color_52x40", "color_52x40.jpg"),
             format="JPEG", quality=75)
    save_pil(Image.fromarray(smooth(80, 120, 13)), add("lossy_120x80", "lossy_120x80.webp"),
             format="WEBP", quality=80)
    save_pil(Image.fromarray(rgba[:30, :40].copy(), "RGBA"), add("alpha_40x30", "alpha_40x30.webp"),
             format="WEBP", lossless=True)
    return cases


def make_decode_only(out):
    """Inputs checked for their decode alone (no resize golden, to keep the data small):
    JPEG progressive, 4:2:2 and 4:4:4 chroma; PNG 1-bit grey, RGB with a tRNS colour, grey with
    a tRNS value, interlaced. Also a CMYK JPEG, which the decoder refuses (not decoded here)."""
    names = []

    def add(name):
        names.append(name)
        return os.path.join(out, name)

    base = smooth(36, 44, 17, noise=3)
    save_pil(Image.fromarray(base), add("progressive_44x36.jpg"), format="JPEG", quality=80,
             progressive=True)
    save_pil(Image.fromarray(base), add("chroma422_44x36.jpg"), format="JPEG", quality=80,
             subsampling=1)
    save_pil(Image.fromarray(base), add("chroma444_44x36.jpg"), format="JPEG", quality=80,
             subsampling=0)
    save_pil(Image.fromarray(smooth(13, 21, 18)[..., 0] > 128), add("bilevel_21x13.png"),
             format="PNG")
    rgb = smooth(12, 16, 19)
    save_pil(Image.fromarray(rgb), add("rgb_trns_16x12.png"), format="PNG",
             transparency=tuple(int(v) for v in rgb[0, 0]))
    grey = smooth(12, 16, 20)[..., 1]
    save_pil(Image.fromarray(grey), add("grey_trns_16x12.png"), format="PNG",
             transparency=int(grey[0, 0]))
    with open(add("interlaced_29x23.png"), "wb") as f:
        f.write(adam7_png(smooth(23, 29, 21, noise=4)))
    save_pil(Image.fromarray(smooth(16, 16, 22)).convert("CMYK"), os.path.join(out, "cmyk_16x16.jpg"),
             format="JPEG")
    return names


def make_processor(tokenizer_file):
    tok = PreTrainedTokenizerFast(
        tokenizer_file=tokenizer_file, pad_token="<pad>",
        extra_special_tokens={"image_token": "<|image|>", "boi_token": "<|image>",
                              "eoi_token": "<image|>", "audio_token": "<|audio|>",
                              "boa_token": "<|audio>", "eoa_token": "<audio|>"})
    return Gemma4Processor(feature_extractor=Gemma4AudioFeatureExtractor(),
                           image_processor=Gemma4ImageProcessor(), tokenizer=tok,
                           video_processor=Gemma4VideoProcessor())


def patches_to_image(patches, th, tw):
    """[n, 16*16*3] in (py, px, c) order, row-major over the grid -> [th, tw, 3]."""
    gh, gw = th // PATCH, tw // PATCH
    return patches.reshape(gh, gw, PATCH, PATCH, 3).transpose(0, 2, 1, 3, 4).reshape(th, tw, 3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/images")
    ap.add_argument("--tokenizer", default="tests/data/tokenizer/tiny_tokenizer.json")
    args = ap.parse_args()
    gold = os.path.join(args.out, "golden")
    os.makedirs(gold, exist_ok=True)
    cases = make_inputs(args.out)
    decode_only = make_decode_only(args.out)
    proc = make_processor(args.tokenizer)
    ip = proc.image_processor
    table = (torch.arange(256, dtype=torch.uint8) * ip.rescale_factor).numpy()
    assert table.dtype == np.float32
    # 280 (the default) where the resized image compresses well; 70 for all; 1120 once.
    budgets = {c: [70] for c, _ in cases}
    for c in ("rgba_64x48", "grey_33x20", "tall_20x300", "wide_500x30", "alpha_40x30",
              "shrink_900x700"):
        budgets[c].append(280)
    budgets["grey_33x20"].append(1120)
    records = []
    for case, name in cases:
        img = Image.open(os.path.join(args.out, name))
        # The processor's own conversion of the PIL image to an RGB uint8 tensor (CHW).
        decoded = ip.process_image(img, do_convert_rgb=True).permute(1, 2, 0).contiguous().numpy()
        if case not in ("photo_640x480", "shrink_900x700"):
            Image.fromarray(decoded).save(os.path.join(gold, f"decoded_{case}.png"), optimize=True)
        for tokens in budgets[case]:
            out = ip(images=[img], max_soft_tokens=tokens, return_tensors="pt")
            pv = out["pixel_values"][0].numpy()
            pos = out["image_position_ids"][0].numpy()
            n_soft = int(out["num_soft_tokens_per_image"][0])
            n = n_soft * POOL * POOL
            real = pos[:, 0] >= 0
            assert real.sum() == n and real[:n].all(), case
            assert (pv[n:] == 0).all() and (pos[n:] == -1).all(), case
            u8 = np.rint(pv[:n] * 255).astype(np.int64)
            assert (table[u8] == pv[:n]).all(), f"{case}: pixel_values are not uint8 * (1/255)"
            gw = int(pos[:n, 0].max()) + 1
            gh = int(pos[:n, 1].max()) + 1
            th, tw = gh * PATCH, gw * PATCH
            resized = patches_to_image(u8.astype(np.uint8), th, tw)
            Image.fromarray(resized).save(os.path.join(gold, f"{case}_{tokens}.png"), optimize=True)
            records.append({"case": case, "file": name, "tokens": tokens, "max_patches": pv.shape[0],
                            "height": img.height, "width": img.width, "target_height": th,
                            "target_width": tw, "num_patches": n, "num_soft_tokens": n_soft})
            if case == "rgb_37x91" and tokens == 70:
                layout = {"case": case, "tokens": tokens,
                          "pixel_values_u8": np.rint(pv[:LAYOUT_ROWS] * 255).astype(int).tolist(),
                          "image_position_ids": pos.astype(int).tolist()}

    for name in decode_only:
        img = Image.open(os.path.join(args.out, name))
        decoded = ip.process_image(img, do_convert_rgb=True).permute(1, 2, 0).contiguous().numpy()
        Image.fromarray(decoded).save(os.path.join(gold, "decoded_" + name.split(".")[0] + ".png"),
                                      optimize=True)

    # Prompt expansion: one prompt with two images of different sizes.
    tok = proc.tokenizer
    prompt = "Compare <|image|> with <|image|> please."
    imgs = [Image.open(os.path.join(args.out, "rgb_37x91.png")),
            Image.open(os.path.join(args.out, "wide_500x30.png"))]
    expansion = []
    for tokens in (70, 280):
        full = proc(text=[prompt], images=[imgs], images_kwargs={"max_soft_tokens": tokens})
        plain = tok(prompt)["input_ids"]
        expansion.append({"tokens": tokens, "prompt_ids": plain,
                          "num_soft_tokens": [int(v) for v in
                                              ip(images=imgs, max_soft_tokens=tokens)["num_soft_tokens_per_image"]],
                          "input_ids": list(map(int, full["input_ids"][0])),
                          "mm_token_type_ids": list(map(int, full["mm_token_type_ids"][0]))})
    # Target sizes alone, for shapes too big or too thin to store as images.
    shapes = [(1, 1), (1, 5000), (5000, 1), (3, 7), (47, 47), (48, 48), (1000, 1001), (480, 640),
              (8192, 8192), (1, 100000), (100000, 3), (4032, 3024), (37, 91), (17, 1023)]
    target_sizes = []
    for h, w in shapes:
        for tokens in (70, 140, 280, 560, 1120):
            th, tw = get_aspect_ratio_preserving_size(h, w, PATCH, tokens * POOL * POOL, POOL)
            target_sizes.append([h, w, tokens, th, tw])
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "image_processor": type(ip).__name__,
            "token_ids": {"boi": tok.convert_tokens_to_ids(tok.boi_token),
                          "image": tok.image_token_id,
                          "eoi": tok.convert_tokens_to_ids(tok.eoi_token)},
            "rescale_table": [float(v) for v in table],
            "cases": records, "decode_only": decode_only, "target_sizes": target_sizes, "layout": layout, "expansion": expansion}
    with open(os.path.join(args.out, "image_golden.json"), "w") as f:
        json.dump(meta, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(records)} cases written to {args.out}")


if __name__ == "__main__":
    main()
