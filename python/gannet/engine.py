"""The engine: loading, requests (blocking, streamed, batched, asyncio), stats and cleanup.

One background thread per engine polls the C ABI (gannet_engine_poll may run on one thread at a
time) and hands each event to the queue of the request it belongs to. Callers wait on those
queues, so any number of threads and asyncio tasks can run requests on one engine at once, and
every request submitted lands in the engine's running batch at once. The poll thread spends its
time inside gannet_engine_poll, where ctypes has released the GIL.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import queue
import threading
import weakref
from typing import Any, AsyncIterator, Callable, Iterator, Optional, Sequence, Union, overload

from . import _ffi
from ._convert import struct_to_dict
from ._request import BuiltRequest, Prompt, is_batch
from .errors import (
    FailedPreconditionError,
    GannetError,
    InternalError,
    InvalidArgumentError,
    check,
    error_for,
)
from .tokenizer import Tokenizer
from .types import (
    Completion,
    LoadProgress,
    Stats,
    StreamEvent,
    TokenLogprob,
    TopLogprob,
    Usage,
)

_FINISH = {_ffi.FINISH_STOP: "stop", _ffi.FINISH_LENGTH: "length", _ffi.FINISH_CANCELLED: "cancelled"}
_POLL_MS = 50  # how long the poll thread waits per call: bounds close()'s latency
_POLL_BATCH = 256

# Engine config keywords: the fields of gannet_engine_config_t and their Python types.
_CONFIG_STR = (
    "backend", "load_format", "draft_model_dir", "kv_cache_dtype", "compute_dtype", "weight_dtype"
)
_CONFIG_INT32 = (
    "device_id max_running_seqs max_step_tokens max_model_len page_size kv_sliding_pages "
    "kv_full_pages num_threads max_queued_requests num_speculative_tokens tensor_parallel_size "
    "max_undelivered_tokens_per_request"
).split()
_CONFIG_INT64 = ("kv_memory_bytes", "max_prefill_tokens_while_decoding", "max_undelivered_tokens")
_CONFIG_BOOL = (
    "disable_prefix_cache disable_cuda_graphs kv_separate_k_eq_v startup_warmup"
).split()
CONFIG_KEYS = tuple(sorted((*_CONFIG_STR, *_CONFIG_INT32, *_CONFIG_INT64, *_CONFIG_BOOL, "device_ids")))


class _Item:
    """One event copied out of the engine's storage (valid only until the next poll)."""

    __slots__ = ("kind", "token_id", "text", "thinking", "logprob", "top", "finish", "usage",
                 "error")

    def __init__(self) -> None:
        self.kind = 0
        self.token_id = 0
        self.text = ""
        self.thinking = False
        self.logprob: Optional[float] = None
        self.top: tuple[TopLogprob, ...] = ()
        self.finish: Optional[str] = None
        self.usage: Optional[Usage] = None
        self.error: Optional[GannetError] = None


def _copy(e: _ffi.Event) -> _Item:
    it = _Item()
    it.kind = e.type
    if e.text_len:
        it.text = ctypes.string_at(e.text, e.text_len).decode("utf-8", "replace")
    it.thinking = e.struct_size > _ffi.EVENT_THINKING_OFFSET and e.thinking != 0
    if e.type == _ffi.EVENT_TOKEN:
        it.token_id = e.token_id
        if e.num_top_logprobs > 0 or e.top_token_ids:
            it.logprob = e.logprob
            n = e.num_top_logprobs
            it.top = tuple(TopLogprob(e.top_token_ids[i], e.top_logprobs[i]) for i in range(n))
        return it
    it.usage = Usage(
        prompt_tokens=e.num_prompt_tokens,
        completion_tokens=e.num_generated_tokens,
        cached_prompt_tokens=e.num_cached_prompt_tokens,
        draft_tokens=e.num_draft_tokens,
        accepted_draft_tokens=e.num_accepted_draft_tokens,
    )
    if e.type == _ffi.EVENT_FINISH:
        it.finish = _FINISH.get(e.finish_reason, "stop")
    else:
        msg = e.message.decode("utf-8", "replace") if e.message else ""
        it.error = error_for(e.status, msg)
    return it


def _closed_item() -> _Item:
    it = _Item()
    it.kind = _ffi.EVENT_ERROR
    it.error = FailedPreconditionError("the engine was closed before the request finished")
    return it


def _event(it: _Item, logprobs: bool) -> StreamEvent:
    if it.kind == _ffi.EVENT_TOKEN:
        return StreamEvent(
            type="token",
            text=it.text,
            thinking=it.thinking,
            token_id=it.token_id,
            logprob=it.logprob if logprobs else None,
            top_logprobs=it.top,
        )
    return StreamEvent(
        type="finish", text=it.text, thinking=it.thinking, finish_reason=it.finish, usage=it.usage
    )  # type: ignore[arg-type]


class _Collector:
    """Accumulates a request's events into a Completion."""

    def __init__(self, logprobs: bool) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.tokens: list[int] = []
        self.logprobs: Optional[list[TokenLogprob]] = [] if logprobs else None

    def add(self, it: _Item) -> Optional[Completion]:
        if it.error is not None:
            raise it.error
        (self.thinking if it.thinking else self.text).append(it.text)
        if it.kind == _ffi.EVENT_TOKEN:
            self.tokens.append(it.token_id)
            if self.logprobs is not None and it.logprob is not None:
                self.logprobs.append(TokenLogprob(it.token_id, it.logprob, it.top))
            return None
        assert it.usage is not None and it.finish is not None
        return Completion(
            text="".join(self.text),
            tokens=self.tokens,
            finish_reason=it.finish,  # type: ignore[arg-type]
            usage=it.usage,
            thinking="".join(self.thinking),
            logprobs=self.logprobs,
        )


class _RequestEvents:
    """What Stream and AsyncStream share: the request, its event queue, cancel and close."""

    def __init__(self, engine: "Engine", rid: int, q: Any, logprobs: bool):
        self._engine = engine
        self._rid = rid
        self._q = q
        self._logprobs = logprobs
        self._done = False

    @property
    def request_id(self) -> int:
        return self._rid

    def _take(self, it: _Item) -> StreamEvent:
        """The event of a dequeued item; an error item raises, the last one ends the stream."""
        if it.error is not None:
            self._done = True
            raise it.error
        if it.kind != _ffi.EVENT_TOKEN:
            self._done = True
        return _event(it, self._logprobs)

    def cancel(self) -> None:
        """Asks the engine to stop the request; a "finish" event with reason "cancelled" follows
        (unless it finished first). Keep iterating to see it, or call close()."""
        if not self._done:
            self._engine._cancel_quiet(self._rid)

    def close(self) -> None:
        """Cancels the request if it is still running and stops delivering its events."""
        if not self._done:
            self._done = True
            self._engine._abandon(self._rid)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Stream(_RequestEvents, Iterator[StreamEvent]):
    """The events of one request, as `Engine.stream` returns it.

    Iterate it for StreamEvents; the last is type "finish". Leaving early (break, an exception,
    `close()`, `with` exit, or dropping the object) cancels the request, which frees its place in
    the engine at once. A failed request raises its typed GannetError from the iteration.
    """

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> StreamEvent:
        if self._done:
            raise StopIteration
        return self._take(self._q.get())  # blocks without the GIL

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncStream(_RequestEvents, AsyncIterator[StreamEvent]):
    """`Stream` for asyncio (`Engine.astream`): `async for` it; leaving early (break, task
    cancellation, `aclose()`, `async with` exit, or dropping it) cancels the request."""

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> StreamEvent:
        if self._done:
            raise StopAsyncIteration
        try:
            it = await self._q.get()
        except asyncio.CancelledError:
            self.close()
            raise
        return self._take(it)

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class Engine:
    """A loaded model serving requests (gannet_engine_t).

    Args:
        model: a Hugging Face checkpoint folder (config.json, safetensors, tokenizer.json) or
            "dummy:<variant>" (real geometry, random weights).
        progress: optional callable given a LoadProgress while the weights load; an exception
            it raises aborts the load and is raised from Engine().
        **config: the fields of gannet_engine_config_t by name (include/gannet/gannet.h), e.g.
            backend="cpu", num_threads=2, max_model_len=4096, max_running_seqs=16,
            draft_model_dir=..., kv_cache_dtype="fp8", device_ids=[0, 1]; flags are bools
            (disable_prefix_cache=True). Unknown keys and wrong types raise
            InvalidArgumentError; what the library refuses raises the typed error of its status.

    Use it as a context manager (`with Engine(...) as engine:`) or call close(). Every method
    may be called from any thread; close() must not race with the others.
    """

    def __init__(
        self, model: str, *, progress: Optional[Callable[[LoadProgress], Any]] = None, **config: Any
    ) -> None:
        self._h: Optional[int] = None
        # Guards the sinks and serialises submit/cancel/stats against close. Re-entrant: a
        # Stream dropped by the garbage collector may run its __del__ (which takes it) on a
        # thread that holds it.
        self._lock = threading.RLock()
        self._sinks: dict[int, Callable[[_Item], None]] = {}
        self._stopping = False
        self._broken: Optional[GannetError] = None
        self._tokenizer: Optional[Tokenizer] = None
        if not isinstance(model, str):
            raise InvalidArgumentError(f"model must be a str (a folder or dummy:VARIANT), got {type(model).__name__}")
        cfg, keep = _build_config(model, config)
        raised: list[BaseException] = []

        def on_progress(_user: Any, p: Any) -> int:
            try:
                v = p.contents
                progress(  # type: ignore[misc]
                    LoadProgress(
                        stage=(v.stage or b"").decode("utf-8", "replace"),
                        fraction=v.fraction,
                        bytes_done=v.bytes_done,
                        bytes_total=v.bytes_total,
                        elapsed_s=v.elapsed_s,
                        bytes_per_s=v.bytes_per_s,
                        eta_s=v.eta_s,
                    )
                )
                return 0
            except BaseException as e:  # noqa: BLE001 - re-raised after create returns
                raised.append(e)
                return 1

        if progress is not None:
            cb = _ffi.PROGRESS_FN(on_progress)
            keep.append(cb)
            cfg.progress_callback = cb
        h = ctypes.c_void_p()
        status = _ffi.lib().gannet_engine_create(ctypes.byref(cfg), ctypes.byref(h))
        if raised:
            if status == _ffi.OK:
                _ffi.lib().gannet_engine_destroy(h)
            raise raised[0]
        check(status)
        self._h = h.value
        self._poller = threading.Thread(target=self._poll_loop, name="gannet-poll", daemon=True)
        self._poller.start()
        _OPEN.add(self)

    # ---- lifetime -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Stops the engine and frees it. Requests still running end: their waiters raise
        FailedPreconditionError. Idempotent."""
        with self._lock:
            if self._h is None or self._stopping:
                return
            self._stopping = True
        self._poller.join()
        with self._lock:
            sinks = list(self._sinks.values())
            self._sinks.clear()
            h, self._h = self._h, None
        for sink in sinks:
            sink(_closed_item())
        _ffi.lib().gannet_engine_destroy(h)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if getattr(self, "_h", None) is not None:
                self.close()
        except Exception:
            pass

    def _handle(self) -> int:
        if self._h is None or self._stopping:
            raise FailedPreconditionError("the engine is closed")
        if self._broken is not None:
            raise self._broken
        return self._h

    # ---- the poll thread --------------------------------------------------------------------

    def _fail_all(self, err: GannetError) -> None:
        with self._lock:
            sinks = list(self._sinks.values())
            self._sinks.clear()
        for sink in sinks:
            it = _Item()
            it.kind = _ffi.EVENT_ERROR
            it.error = err
            sink(it)

    def _poll_loop(self) -> None:
        try:
            self._poll_events()
        except BaseException as e:  # a bug here must not leave waiters hanging
            self._broken = InternalError(f"the gannet poll thread failed: {e!r}")
            self._fail_all(self._broken)
            raise

    def _poll_events(self) -> None:
        lib = _ffi.lib()
        events = ctypes.POINTER(ctypes.POINTER(_ffi.Event))()
        n = ctypes.c_size_t(0)
        h = self._h
        while not self._stopping:
            status = lib.gannet_engine_poll(h, _POLL_MS, _POLL_BATCH, ctypes.byref(events), ctypes.byref(n))
            if status != _ffi.OK:  # poll fails only on misuse; end every waiter with the reason
                raise error_for(status, "gannet_engine_poll failed")
            for i in range(n.value):
                e = events[i].contents
                it = _copy(e)
                with self._lock:
                    if it.kind == _ffi.EVENT_TOKEN:
                        sink = self._sinks.get(e.request_id)
                    else:
                        sink = self._sinks.pop(e.request_id, None)
                if sink is not None:  # None: an abandoned stream's request
                    sink(it)

    # ---- requests ---------------------------------------------------------------------------

    def _submit(self, prompt: Prompt, sampling: dict[str, Any], sink: Callable[[_Item], None]) -> tuple[int, int]:
        req = BuiltRequest(prompt, sampling)
        rid = ctypes.c_uint64(0)
        with self._lock:  # the poll thread must not see this id's events before the sink exists
            h = self._handle()
            check(_ffi.lib().gannet_engine_submit(h, ctypes.byref(req.struct), ctypes.byref(rid)))
            self._sinks[rid.value] = sink
        return rid.value, req.logprobs

    def _cancel_quiet(self, rid: int) -> None:
        with self._lock:
            if self._h is None or self._stopping:
                return
            _ffi.lib().gannet_engine_cancel(self._h, rid)  # NOT_FOUND: it already finished

    def _abandon(self, rid: int) -> None:
        """Stops delivering a request's events and cancels it if it still runs."""
        with self._lock:
            self._sinks.pop(rid, None)
        self._cancel_quiet(rid)

    def stream(self, prompt: Prompt, **sampling: Any) -> Stream:
        """Submits one request and returns its events as they come (see Stream).

        The prompt is text (str, tokenized with <bos> prepended), token ids (list of int) or chat
        messages (list of {"role", "content"} dicts, rendered with the model's chat template).

        Sampling keywords (all optional; defaults are the C ABI's): max_tokens (None = until the
        context is full), min_tokens, temperature (0 = greedy, the default), top_k, top_p, min_p,
        repetition_penalty, presence_penalty, frequency_penalty, seed (fixed seed: repeatable;
        None = random), stop (str or list of str), stop_token_ids, ignore_eos, logprobs (0..20),
        priority, deadline_ms, add_generation_prompt, enable_thinking, disable_speculation,
        split_special_tokens (chat content from untrusted users).
        """
        q: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        rid, lp = self._submit(prompt, sampling, q.put)
        return Stream(self, rid, q, lp > 0)

    @overload
    def generate(self, prompt: str | Sequence[int], **sampling: Any) -> Completion: ...
    @overload
    def generate(self, prompt: list, **sampling: Any) -> Union[Completion, list[Completion]]: ...

    def generate(self, prompt: Any, **sampling: Any) -> Any:
        """Runs a request to its end and returns its Completion.

        A list of prompts (strs, token-id lists or message lists) is a batch: every request is
        submitted before any is waited for, so the engine runs them together, and a list of
        Completions comes back in the same order. A failure of one cancels the others and raises.
        Sampling keywords as in stream().
        """
        if is_batch(prompt):
            return self._generate_batch(prompt, sampling)
        s = self.stream(prompt, **sampling)
        col = _Collector(s._logprobs)
        try:
            while True:
                it = s._q.get()
                done = col.add(it)
                if done is not None:
                    s._done = True
                    return done
        finally:
            s.close()

    def _generate_batch(self, prompts: list, sampling: dict[str, Any]) -> list[Completion]:
        streams: list[Stream] = []
        try:
            for p in prompts:
                streams.append(self.stream(p, **sampling))
            out = []
            for s in streams:
                col = _Collector(s._logprobs)
                while True:
                    done = col.add(s._q.get())
                    if done is not None:
                        s._done = True
                        out.append(done)
                        break
            return out
        finally:
            for s in streams:
                s.close()

    def astream(self, prompt: Prompt, **sampling: Any) -> AsyncStream:
        """stream() for asyncio: `async for ev in engine.astream(...)`. Call it from a running
        event loop; events are delivered to that loop."""
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[_Item] = asyncio.Queue()

        def sink(it: _Item) -> None:
            try:
                loop.call_soon_threadsafe(q.put_nowait, it)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass

        rid, lp = self._submit(prompt, sampling, sink)
        return AsyncStream(self, rid, q, lp > 0)

    async def agenerate(self, prompt: Any, **sampling: Any) -> Any:
        """generate() for asyncio (a list of prompts is a batch, as there). Cancelling the task
        cancels the request(s)."""
        if is_batch(prompt):
            streams = [self.astream(p, **sampling) for p in prompt]
            try:
                return [await _acollect(s) for s in streams]
            finally:
                for s in streams:
                    s.close()
        s = self.astream(prompt, **sampling)
        try:
            return await _acollect(s)
        finally:
            s.close()

    def cancel(self, request_id: int) -> None:
        """Cancels a request by id (Stream.request_id). NotFoundError when it is unknown or has
        finished."""
        with self._lock:
            check(_ffi.lib().gannet_engine_cancel(self._handle(), request_id))

    # ---- information ------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """A consistent snapshot of the engine's counters (gannet_engine_get_stats)."""
        s = _ffi.EngineStats()
        s.struct_size = ctypes.sizeof(s)
        with self._lock:
            check(_ffi.lib().gannet_engine_get_stats(self._handle(), ctypes.byref(s)))
        return Stats(**struct_to_dict(s))

    @property
    def tokenizer(self) -> Tokenizer:
        """The engine's tokenizer (valid until close). NotFoundError for models without one
        (dummy models, folders without tokenizer.json)."""
        if self._tokenizer is None:
            h = ctypes.c_void_p()
            with self._lock:
                check(_ffi.lib().gannet_engine_tokenizer(self._handle(), ctypes.byref(h)))
            self._tokenizer = Tokenizer(h.value, owner=self)  # type: ignore[arg-type]
        elif self.closed:
            raise FailedPreconditionError("the engine is closed")
        return self._tokenizer


# Engines still open at exit are closed before the interpreter goes (the poll thread keeps an
# engine alive until close(), so the garbage collector never frees one that is left open).
_OPEN: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    for e in list(_OPEN):
        try:
            e.close()
        except Exception:
            pass


async def _acollect(s: AsyncStream) -> Completion:
    col = _Collector(s._logprobs)
    while True:
        try:
            it = await s._q.get()
        except asyncio.CancelledError:
            s.close()
            raise
        done = col.add(it)
        if done is not None:
            s._done = True
            return done


def _build_config(model: str, config: dict[str, Any]) -> tuple[_ffi.EngineConfig, list[Any]]:
    from ._request import _INT32, _INT64, _bool, _int

    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise InvalidArgumentError(
            f"unknown engine option(s) {', '.join(unknown)}; known: {', '.join(CONFIG_KEYS)}"
        )
    cfg = _ffi.EngineConfig()
    cfg.struct_size = ctypes.sizeof(cfg)
    keep: list[Any] = []
    b = model.encode("utf-8")
    keep.append(b)
    cfg.model_dir = b
    for k, v in config.items():
        if v is None:
            continue
        if k in _CONFIG_STR:
            if not isinstance(v, str):
                raise InvalidArgumentError(f"{k} must be a str, got {type(v).__name__}")
            e = v.encode("utf-8")
            keep.append(e)
            setattr(cfg, k, e)
        elif k in _CONFIG_INT32:
            setattr(cfg, k, _int(k, v, _INT32))
        elif k in _CONFIG_INT64:
            setattr(cfg, k, _int(k, v, _INT64))
        elif k in _CONFIG_BOOL:
            setattr(cfg, k, _bool(k, v))
        elif k == "device_ids":
            ids = [_int("device_ids element", x) for x in v]
            arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
            keep.append(arr)
            cfg.device_ids = arr
            cfg.num_device_ids = len(ids)
    return cfg, keep


def model_info(model: str) -> dict[str, Any]:
    """A checkpoint's geometry without loading weights (gannet_model_info): model_type,
    variant, num_parameters, weight_bytes, num_layers, vocab_size, ..."""
    info = _ffi.ModelInfo()
    info.struct_size = ctypes.sizeof(info)
    check(_ffi.lib().gannet_model_info(model.encode("utf-8"), ctypes.byref(info)))
    d = struct_to_dict(info)
    d["has_tokenizer"] = bool(d["has_tokenizer"])
    return d


def version() -> str:
    """The linked libgannet's version, "MAJOR.MINOR.PATCH"."""
    return _ffi.lib().gannet_version().decode()


__all__ = ["Engine", "Stream", "AsyncStream", "model_info", "version", "CONFIG_KEYS"]
