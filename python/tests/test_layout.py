"""The ctypes mirror of gannet.h (gannet/_ffi.py) has the C compiler's sizes and offsets."""

from __future__ import annotations

import ctypes
import os
import subprocess

import pytest

from gannet import _ffi


def test_structs_match_the_c_compiler():
    exe = os.environ.get("GANNET_ABI_SIZES")
    if not exe:
        pytest.skip("GANNET_ABI_SIZES is not set to tests/examples/abi_sizes.c built")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    checked = 0
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == "size" and parts[1] in _ffi.STRUCTS:
            assert ctypes.sizeof(_ffi.STRUCTS[parts[1]]) == int(parts[2]), line
            checked += 1
        elif parts[0] == "field":
            struct, field = parts[1].split(".", 1)
            if struct not in _ffi.STRUCTS:
                continue
            desc = getattr(_ffi.STRUCTS[struct], field, None)
            assert desc is not None, f"{struct}.{field} is missing from _ffi.py"
            assert (desc.offset, desc.size) == (int(parts[2]), int(parts[3])), line
            checked += 1
        elif parts[0] == "const" and hasattr(_ffi, parts[1].removeprefix("GANNET_")):
            assert getattr(_ffi, parts[1].removeprefix("GANNET_")) == int(parts[2]), line
    # Every struct of the header is mirrored, and every field the C side lists was compared.
    sizes = {l.split()[1] for l in out.splitlines() if l.startswith("size gannet_") and l.split()[1] != "gannet_status_t"}
    assert sizes == set(_ffi.STRUCTS), sizes ^ set(_ffi.STRUCTS)
    assert checked > 150
