"""Builds a gannet_request_t from a Python prompt and sampling keywords."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from . import _ffi
from .errors import InvalidArgumentError
from .tokenizer import Message, chat_messages

Prompt = Union[str, Sequence[int], Sequence[Message]]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _int(name: str, v: Any, lo_hi: tuple[int, int] = _INT32) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgumentError(f"{name} must be an int, got {type(v).__name__}")
    if not lo_hi[0] <= v <= lo_hi[1]:
        raise InvalidArgumentError(f"{name} = {v} is out of range [{lo_hi[0]}, {lo_hi[1]}]")
    return v


def _float(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidArgumentError(f"{name} must be a number, got {type(v).__name__}")
    return float(v)


def _bool(name: str, v: Any) -> int:
    if not isinstance(v, bool):
        raise InvalidArgumentError(f"{name} must be a bool, got {type(v).__name__}")
    return int(v)


def prompt_kind(p: Any) -> Optional[str]:
    """"text", "tokens" or "messages" for a single prompt; None for anything else."""
    if isinstance(p, str):
        return "text"
    if isinstance(p, Sequence) and not isinstance(p, (bytes, bytearray)):
        if len(p) > 0 and all(isinstance(x, Mapping) for x in p):
            return "messages"
        if all(isinstance(x, int) and not isinstance(x, bool) for x in p):
            return "tokens"
    return None


def is_batch(p: Any) -> bool:
    """A list whose elements are prompts (str, token lists or message lists) is a batch."""
    if not isinstance(p, list) or not p:
        return False
    return all(isinstance(x, str) or (isinstance(x, (list, tuple)) and prompt_kind(x)) for x in p)


SAMPLING_KEYS = (
    "max_tokens min_tokens temperature top_k top_p min_p repetition_penalty presence_penalty "
    "frequency_penalty seed stop stop_token_ids ignore_eos logprobs priority deadline_ms "
    "add_generation_prompt enable_thinking disable_speculation split_special_tokens images "
    "image_tokens"
).split()


class BuiltRequest:
    """A gannet_request_t and the Python objects its pointers point into (alive while this is)."""

    def __init__(self, prompt: Prompt, sampling: dict[str, Any]) -> None:
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            raise InvalidArgumentError(
                f"unknown sampling option(s) {', '.join(unknown)}; known: {', '.join(SAMPLING_KEYS)}"
            )
        r = _ffi.Request()
        r.struct_size = ctypes.sizeof(r)
        keep: list[Any] = []
        kind = prompt_kind(prompt)
        if kind == "text":
            b = prompt.encode("utf-8")  # type: ignore[union-attr]
            keep.append(b)
            r.prompt_text = b
        elif kind == "tokens":
            ids = [_int("prompt token id", x) for x in prompt]  # type: ignore[union-attr]
            arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
            keep.append(arr)
            r.prompt_tokens = arr
            r.num_prompt_tokens = len(ids)
        elif kind == "messages":
            arr, strs = chat_messages(prompt)  # type: ignore[arg-type]
            keep += [arr, strs]
            r.messages = arr
            r.num_messages = len(arr)
        else:
            raise InvalidArgumentError(
                "the prompt must be text (str), token ids (list of int) or chat messages "
                f"(list of {{'role', 'content'}} dicts), got {type(prompt).__name__}"
            )
        s = sampling
        if s.get("max_tokens") is not None:
            r.max_tokens = _int("max_tokens", s["max_tokens"])
        for k in ("min_tokens", "top_k", "logprobs", "priority"):
            if s.get(k) is not None:
                setattr(r, k, _int(k, s[k]))
        for k in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                  "frequency_penalty"):
            if s.get(k) is not None:
                setattr(r, k, _float(k, s[k]))
        if s.get("seed") is not None:
            r.seed_mode = _ffi.SEED_FIXED
            r.seed = _int("seed", s["seed"], (0, 2**64 - 1))
        if s.get("deadline_ms") is not None:
            r.deadline_ms = _int("deadline_ms", s["deadline_ms"], _INT64)
        stop = s.get("stop")
        if stop is not None:
            strs = [stop] if isinstance(stop, str) else list(stop)
            if not all(isinstance(x, str) for x in strs):
                raise InvalidArgumentError("stop must be a str or a list of str")
            enc = [x.encode("utf-8") for x in strs]
            arr = (ctypes.c_char_p * max(len(enc), 1))(*enc)
            keep += [enc, arr]
            r.stop_strings = arr
            r.num_stop_strings = len(enc)
        if s.get("stop_token_ids") is not None:
            ids = [_int("stop_token_ids element", x) for x in s["stop_token_ids"]]
            arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
            keep.append(arr)
            r.stop_token_ids = arr
            r.num_stop_token_ids = len(ids)
        if s.get("ignore_eos") is not None:
            r.ignore_default_stop_tokens = _bool("ignore_eos", s["ignore_eos"])
        if s.get("add_generation_prompt") is not None:
            # The C field: 0 (default) or 1 = add the model turn opener, 2 = don't.
            r.add_generation_prompt = 1 if _bool("add_generation_prompt", s["add_generation_prompt"]) else 2
        for k in ("enable_thinking", "disable_speculation"):
            if s.get(k) is not None:
                setattr(r, k, _bool(k, s[k]))
        if s.get("split_special_tokens") is not None:
            r.split_special_tokens = _bool("split_special_tokens", s["split_special_tokens"])
        if s.get("images") is not None:
            # Encoded PNG/JPEG/WebP bytes, one per image placeholder of the prompt ("<|image|>"
            # in text or a message), in order; image_tokens: the soft-token budget of each.
            imgs = list(s["images"])
            if not all(isinstance(x, (bytes, bytearray)) for x in imgs):
                raise InvalidArgumentError("images must be a list of bytes (PNG, JPEG or WebP)")
            budget = _int("image_tokens", s.get("image_tokens") or 0)
            arr = (_ffi.Image * max(len(imgs), 1))()
            for i, data in enumerate(imgs):
                buf = (ctypes.c_uint8 * max(len(data), 1)).from_buffer_copy(bytes(data) or b"\0")
                keep.append(buf)
                arr[i].struct_size = ctypes.sizeof(_ffi.Image)
                arr[i].max_soft_tokens = budget
                arr[i].data = ctypes.cast(buf, ctypes.POINTER(ctypes.c_uint8))
                arr[i].size = len(data)
            keep.append(arr)
            r.images = arr
            r.num_images = len(imgs)
        self.struct = r
        self.logprobs = r.logprobs
        self._keep = keep
