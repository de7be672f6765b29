"""gannet: Gemma-4 inference from Python, over libgannet's C ABI (include/gannet/gannet.h).

    from gannet import Engine
    with Engine("path/to/gemma-4-e4b", backend="cpu") as engine:
        out = engine.generate([{"role": "user", "content": "Hi!"}], max_tokens=64)
        print(out.text, out.finish_reason, out.usage)
"""

from .engine import CONFIG_KEYS, AsyncStream, Engine, Stream, model_info, version
from .errors import (
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    DeviceLostError,
    FailedPreconditionError,
    GannetError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfMemoryError,
    ResourceExhaustedError,
    UnimplementedError,
)
from .log import log_to_python, log_to_stderr
from .tokenizer import Tokenizer
from .types import Completion, LoadProgress, Stats, StreamEvent, TokenLogprob, TopLogprob, Usage

__version__ = "0.2.0"

__all__ = [
    "Engine", "Stream", "AsyncStream", "Tokenizer", "model_info", "version", "CONFIG_KEYS",
    "log_to_python", "log_to_stderr",
    "Completion", "StreamEvent", "Usage", "Stats", "TokenLogprob", "TopLogprob", "LoadProgress",
    "GannetError", "InvalidArgumentError", "NotFoundError", "OutOfMemoryError",
    "ResourceExhaustedError", "UnimplementedError", "DataLossError", "DeviceLostError",
    "CancelledError", "DeadlineExceededError", "FailedPreconditionError", "InternalError",
]
