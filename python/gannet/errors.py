"""Exceptions raised by gannet, one class per C ABI status code (GANNET_ERR_*).

Each also derives from the closest built-in exception, so `except ValueError` catches a bad
argument and `except TimeoutError` a passed deadline. Code that needs the exact reason catches
the class (or reads `.status`), never the message text.
"""

from __future__ import annotations

from . import _ffi


class GannetError(Exception):
    """A failed gannet call or request.

    Attributes:
        status: the C ABI status code (GANNET_ERR_*).
        status_name: its name, e.g. "GANNET_ERR_INVALID_ARGUMENT".
        message: what was wrong, as the library said it.
    """

    status: int = _ffi.ERR_INTERNAL

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message

    @property
    def status_name(self) -> str:
        return _STATUS_NAMES.get(self.status, f"status {self.status}")


class InvalidArgumentError(GannetError, ValueError):
    """A bad argument, file, field, token or limit (GANNET_ERR_INVALID_ARGUMENT)."""

    status = _ffi.ERR_INVALID_ARGUMENT


class NotFoundError(GannetError, LookupError):
    """A file, device or request that does not exist (GANNET_ERR_NOT_FOUND)."""

    status = _ffi.ERR_NOT_FOUND


class OutOfMemoryError(GannetError, MemoryError):
    """Host or device memory exhausted (GANNET_ERR_OUT_OF_MEMORY)."""

    status = _ffi.ERR_OUT_OF_MEMORY


class ResourceExhaustedError(GannetError):
    """KV pages, queue slots, a buffer or another limit (GANNET_ERR_RESOURCE_EXHAUSTED)."""

    status = _ffi.ERR_RESOURCE_EXHAUSTED


class UnimplementedError(GannetError, NotImplementedError):
    """Unsupported model, dtype, architecture or option (GANNET_ERR_UNIMPLEMENTED)."""

    status = _ffi.ERR_UNIMPLEMENTED


class DataLossError(GannetError):
    """A corrupt checkpoint (GANNET_ERR_DATA_LOSS)."""

    status = _ffi.ERR_DATA_LOSS


class DeviceLostError(GannetError):
    """An unrecoverable GPU/NCCL failure; the engine is dead (GANNET_ERR_DEVICE_LOST)."""

    status = _ffi.ERR_DEVICE_LOST


class CancelledError(GannetError):
    """Cancelled by the caller or its progress callback (GANNET_ERR_CANCELLED).

    A request cancelled while it runs is not an error: it finishes with finish_reason
    "cancelled"."""

    status = _ffi.ERR_CANCELLED


class DeadlineExceededError(GannetError, TimeoutError):
    """A request's deadline passed (GANNET_ERR_DEADLINE_EXCEEDED)."""

    status = _ffi.ERR_DEADLINE_EXCEEDED


class FailedPreconditionError(GannetError):
    """A call the current state cannot serve (GANNET_ERR_FAILED_PRECONDITION), e.g. a closed
    engine."""

    status = _ffi.ERR_FAILED_PRECONDITION


class InternalError(GannetError):
    """A bug in gannet (GANNET_ERR_INTERNAL)."""

    status = _ffi.ERR_INTERNAL


_BY_STATUS: dict[int, type[GannetError]] = {
    cls.status: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        OutOfMemoryError,
        ResourceExhaustedError,
        UnimplementedError,
        DataLossError,
        DeviceLostError,
        CancelledError,
        DeadlineExceededError,
        FailedPreconditionError,
        InternalError,
    )
}

_STATUS_NAMES = {
    _ffi.ERR_INVALID_ARGUMENT: "GANNET_ERR_INVALID_ARGUMENT",
    _ffi.ERR_NOT_FOUND: "GANNET_ERR_NOT_FOUND",
    _ffi.ERR_OUT_OF_MEMORY: "GANNET_ERR_OUT_OF_MEMORY",
    _ffi.ERR_RESOURCE_EXHAUSTED: "GANNET_ERR_RESOURCE_EXHAUSTED",
    _ffi.ERR_UNIMPLEMENTED: "GANNET_ERR_UNIMPLEMENTED",
    _ffi.ERR_DATA_LOSS: "GANNET_ERR_DATA_LOSS",
    _ffi.ERR_DEVICE_LOST: "GANNET_ERR_DEVICE_LOST",
    _ffi.ERR_CANCELLED: "GANNET_ERR_CANCELLED",
    _ffi.ERR_DEADLINE_EXCEEDED: "GANNET_ERR_DEADLINE_EXCEEDED",
    _ffi.ERR_FAILED_PRECONDITION: "GANNET_ERR_FAILED_PRECONDITION",
    _ffi.ERR_INTERNAL: "GANNET_ERR_INTERNAL",
}


def error_for(status: int, message: str) -> GannetError:
    """The exception for a C ABI status (an unknown code becomes a plain GannetError)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        return GannetError(message, status)
    return cls(message)


def check(status: int) -> None:
    """Raises the typed exception for a failed C call, with the thread's last error message.
    Call it on the thread that made the call (the message is per thread)."""
    if status == _ffi.OK:
        return
    raw = _ffi.lib().gannet_last_error_message()
    raise error_for(status, raw.decode("utf-8", "replace") if raw else "")
