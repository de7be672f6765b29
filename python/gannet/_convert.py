"""Copies ctypes structs into plain Python values (strings decoded, arrays as tuples)."""

from __future__ import annotations

import ctypes
from typing import Any


def struct_to_dict(s: ctypes.Structure) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, ctype in s._fields_:  # type: ignore[attr-defined]
        if name == "struct_size":
            continue
        v = getattr(s, name)
        if isinstance(v, bytes):  # char[N]
            v = v.decode("utf-8", "replace")
        elif isinstance(v, ctypes.Array):
            v = tuple(v)
        out[name] = v
    return out
