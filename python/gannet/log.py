"""Routes libgannet's log (process-wide, gannet_set_log_callback) into Python's logging."""

from __future__ import annotations

import atexit
import ctypes
import logging
import threading
from typing import Optional

from . import _ffi

_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)
_TO_PY = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}
_lock = threading.Lock()
_installed: Optional[object] = None  # the ctypes callback, alive while the library may call it


def _c_level(level: int) -> int:
    if level <= logging.DEBUG:
        return 0
    if level <= logging.INFO:
        return 1
    if level <= logging.WARNING:
        return 2
    if level <= logging.ERROR:
        return 3
    return 4  # GANNET_LOG_LEVEL_OFF


def log_to_python(logger: Optional[logging.Logger] = None, level: int = logging.WARNING) -> None:
    """Sends the library's messages at `level` and above to `logger` (default: the "gannet"
    logger) instead of stderr. Process-wide, for every engine; call it before creating engines.
    The messages come from gannet's own threads, one at a time."""
    global _installed
    target = logger or logging.getLogger("gannet")

    def forward(_user: object, c_level: int, message: bytes) -> None:
        try:
            target.log(_TO_PY.get(c_level, logging.ERROR), (message or b"").decode("utf-8", "replace"))
        except Exception:  # a failing handler must not unwind into C++
            pass

    cb = _LOG_FN(forward)
    with _lock:
        _ffi.lib().gannet_set_log_callback(ctypes.cast(cb, ctypes.c_void_p), None, _c_level(level))
        _installed = cb  # replaced only after the library stopped using the old one


def log_to_stderr(level: int = logging.WARNING) -> None:
    """Restores the library's own stderr log (the default) at `level`."""
    global _installed
    with _lock:
        _ffi.lib().gannet_set_log_callback(None, None, _c_level(level))
        _installed = None


@atexit.register
def _restore_at_exit() -> None:
    # The interpreter must not be called into once it finalizes.
    if _installed is not None:
        log_to_stderr()
