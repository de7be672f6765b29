"""The values gannet hands back: stream events, completions, usage, stats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability and the most likely alternatives (logprobs=N)."""

    token_id: int
    logprob: float
    top: tuple[TopLogprob, ...]


@dataclass(frozen=True)
class Usage:
    """Token counts of one request."""

    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0  # prompt tokens served from the prefix cache
    draft_tokens: int = 0  # speculative drafts verified
    accepted_draft_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class StreamEvent:
    """One event of `Engine.stream`.

    type "token": one generated token: `token_id`, the text it completed (`text`, may be "":
    text is held back while it could start a stop string, and Gemma-4's thinking markers carry
    none), `thinking` (True for the model's reasoning, False for its answer) and, with logprobs,
    `logprob`/`top_logprobs`.
    type "finish": the last event: `finish_reason`, `usage`, and any text held back until the end
    (with its `thinking` flag).
    A failed request raises its typed GannetError from the iterator instead.
    """

    type: Literal["token", "finish"]
    text: str = ""
    thinking: bool = False
    token_id: Optional[int] = None
    logprob: Optional[float] = None
    top_logprobs: tuple[TopLogprob, ...] = ()
    finish_reason: Optional[FinishReason] = None
    usage: Optional[Usage] = None


@dataclass
class Completion:
    """A finished request: the answer `text`, the model's `thinking` (Gemma-4 reasoning, kept out
    of `text`), every generated token id in order, why it ended and its token counts."""

    text: str
    tokens: list[int]
    finish_reason: FinishReason
    usage: Usage
    thinking: str = ""
    logprobs: Optional[list[TokenLogprob]] = None


@dataclass(frozen=True)
class Stats:
    """A consistent snapshot of an engine (gannet_engine_stats_t); pairs are (sliding-window
    pool, full-attention pool)."""

    num_running: int
    num_waiting: int
    kv_pages_total: tuple[int, int]
    kv_pages_used: tuple[int, int]
    kv_pages_cached: tuple[int, int]
    kv_pages_free: tuple[int, int]
    page_size: int
    prefix_cache_hit_tokens: int
    prefix_cache_query_tokens: int
    prefix_cache_hit_rate: float
    total_prompt_tokens: int
    total_generated_tokens: int
    num_preemptions: int
    num_steps: int
    prompt_tokens_per_s: float
    generated_tokens_per_s: float
    weight_bytes: int
    kv_bytes_per_token: tuple[int, int]
    sliding_window: int
    max_model_len: int
    max_running_seqs: int
    device_id: int
    kv_bytes: int
    device_memory_bytes: int
    load_seconds: float
    backend: str
    device_name: str
    backend_fallback: str
    num_speculative_tokens: int
    spec_verify_chunks: int
    spec_draft_tokens: int
    spec_accepted_tokens: int
    spec_mean_accepted_length: float
    spec_draft_rounds: int
    timed_decode_steps: int
    timed_decode_seconds: float
    timed_decode_device_seconds: float
    kv_cache_dtype: str
    compute_dtype: str


@dataclass(frozen=True)
class LoadProgress:
    """Progress of one loading stage, as `Engine(progress=...)` receives it."""

    stage: str
    fraction: float
    bytes_done: int
    bytes_total: int
    elapsed_s: float
    bytes_per_s: float
    eta_s: float  # < 0 while unknown
