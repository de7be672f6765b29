"""A model's tokenizer and chat template (gannet_tokenize, gannet_apply_chat_template, ...)."""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from . import _ffi
from .errors import FailedPreconditionError, check

Message = Mapping[str, str]


def chat_messages(messages: Sequence[Message]) -> tuple[ctypes.Array, list[bytes]]:
    """`[{"role": ..., "content": ...}, ...]` as a C array; the returned bytes keep the strings
    alive while the array is in use."""
    arr = (_ffi.ChatMessage * len(messages))()
    keep: list[bytes] = []
    for i, m in enumerate(messages):
        try:
            role, content = m["role"], m["content"]
        except (KeyError, TypeError):
            raise TypeError(
                f"message {i} must be a mapping with 'role' and 'content', got {m!r}"
            ) from None
        if not isinstance(role, str) or not isinstance(content, str):
            raise TypeError(f"message {i}: 'role' and 'content' must be str")
        r, c = role.encode("utf-8"), content.encode("utf-8")
        keep += [r, c]
        arr[i].struct_size = ctypes.sizeof(_ffi.ChatMessage)
        arr[i].role = r
        arr[i].content = c
    return arr, keep


def _text_call(fill: Callable[[Any, int, Any], int]) -> bytes:
    """Runs a count-then-fill buffer call of the C ABI and returns the bytes."""
    n = ctypes.c_size_t(0)
    check(fill(None, 0, ctypes.byref(n)))
    buf = ctypes.create_string_buffer(n.value + 1)
    check(fill(buf, n.value + 1, ctypes.byref(n)))
    return buf.raw[: n.value]


class Tokenizer:
    """Tokenizes, detokenizes and renders chat prompts exactly as the engine does.

    `Engine.tokenizer` gives the engine's own (valid while the engine is open);
    `Tokenizer.open(model_dir)` loads one without a model (close it, or use `with`).
    Every method may be called from several threads at once.
    """

    def __init__(self, handle: int, owner: Any = None, owned: bool = False) -> None:
        self._handle: Optional[int] = handle
        self._owner = owner  # the Engine whose tokenizer this is (kept alive, checked open)
        self._owned = owned
        info = _ffi.TokenizerInfo()
        info.struct_size = ctypes.sizeof(info)
        check(_ffi.lib().gannet_tokenizer_get_info(handle, ctypes.byref(info)))
        self.vocab_size: int = info.vocab_size
        self.bos_id: int = info.bos_id
        self.eos_id: int = info.eos_id
        self.pad_id: int = info.pad_id
        self.unk_id: int = info.unk_id
        self.start_of_turn_id: int = info.start_of_turn_id
        self.end_of_turn_id: int = info.end_of_turn_id

    @classmethod
    def open(cls, model_dir: str) -> "Tokenizer":
        """Loads <model_dir>/tokenizer.json (and config.json for the chat template's variant)
        without the weights. Raises NotFoundError when the folder has no tokenizer.json."""
        h = ctypes.c_void_p()
        check(_ffi.lib().gannet_tokenizer_open(model_dir.encode("utf-8"), ctypes.byref(h)))
        return cls(h.value, owned=True)

    def close(self) -> None:
        """Frees a tokenizer from `Tokenizer.open` (an engine's own closes with the engine)."""
        if self._owned and self._handle is not None:
            _ffi.lib().gannet_tokenizer_close(self._handle)
        self._handle = None

    def __enter__(self) -> "Tokenizer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def _h(self) -> int:
        if self._handle is None or (self._owner is not None and self._owner.closed):
            raise FailedPreconditionError("the tokenizer (or its engine) is closed")
        return self._handle

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; add_special_tokens prepends <bos> as the model expects of a raw
        prompt (a chat template's output already starts with it: pass False)."""
        h = self._h()
        data = text.encode("utf-8")
        f = _ffi.lib().gannet_tokenize
        n = ctypes.c_size_t(0)
        check(f(h, data, len(data), int(add_special_tokens), None, 0, ctypes.byref(n)))
        ids = (ctypes.c_int32 * max(n.value, 1))()
        check(f(h, data, len(data), int(add_special_tokens), ids, n.value, ctypes.byref(n)))
        return list(ids[: n.value])

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of `ids`; skip_special_tokens drops <bos>, <|turn> and the like."""
        h = self._h()
        seq = list(ids)
        arr = (ctypes.c_int32 * max(len(seq), 1))(*seq)
        f = _ffi.lib().gannet_detokenize
        raw = _text_call(lambda buf, cap, n: f(h, arr, len(seq), int(skip_special_tokens), buf, cap, n))
        return raw.decode("utf-8", "replace")

    def token_to_piece(self, token_id: int) -> bytes:
        """The bytes one token contributes alone (a byte token's raw byte may not be UTF-8)."""
        h = self._h()
        f = _ffi.lib().gannet_token_to_piece
        return _text_call(lambda buf, cap, n: f(h, token_id, buf, cap, n))

    def apply_chat_template(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        enable_thinking: bool = False,
    ) -> str:
        """The prompt text the engine renders for `messages` (it starts with "<bos>": encode it
        with add_special_tokens=False)."""
        h = self._h()
        arr, _keep = chat_messages(messages)
        f = _ffi.lib().gannet_apply_chat_template
        raw = _text_call(
            lambda buf, cap, n: f(
                h, arr, len(messages), int(add_generation_prompt), int(enable_thinking), buf, cap, n
            )
        )
        return raw.decode("utf-8", "replace")
