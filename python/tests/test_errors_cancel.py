"""Typed errors, cancellation, cleanup."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import gannet
from conftest import THREADS, TINY, TRAINED

LONG = {"max_tokens": 400, "ignore_eos": True}  # runs far longer than the tests wait


def _idle(engine: gannet.Engine, timeout_s: float = 10.0) -> gannet.Stats:
    """Waits until nothing runs or waits in the engine."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = engine.stats
        if s.num_running == 0 and s.num_waiting == 0:
            return s
        assert time.monotonic() < deadline, f"still running: {s.num_running}, waiting {s.num_waiting}"
        time.sleep(0.01)


@pytest.mark.parametrize(
    "config,error",
    [
        ({"no_such_option": 1}, gannet.InvalidArgumentError),
        ({"num_threads": "two"}, gannet.InvalidArgumentError),
        ({"num_threads": 2**40}, gannet.InvalidArgumentError),
        ({"backend": "tpu"}, gannet.InvalidArgumentError),
        ({"page_size": 4096}, gannet.InvalidArgumentError),
        ({"num_threads": 100000}, gannet.InvalidArgumentError),
    ],
)
def test_bad_config_raises_typed_error(config, error):
    with pytest.raises(error) as info:
        gannet.Engine(TRAINED, **{"backend": "cpu", **config})
    assert isinstance(info.value, ValueError)  # InvalidArgumentError is also a ValueError
    assert info.value.status == 1 and info.value.status_name == "GANNET_ERR_INVALID_ARGUMENT"
    assert str(info.value)


def test_missing_model_is_not_found(tmp_path):
    with pytest.raises(gannet.NotFoundError) as info:
        gannet.Engine(str(tmp_path / "nothing-here"), backend="cpu")
    assert info.value.status == 2


def test_bad_request_raises_typed_error(engine):
    with pytest.raises(gannet.InvalidArgumentError):
        engine.generate("hi", temperature=-1.0)
    with pytest.raises(gannet.InvalidArgumentError):
        engine.generate("hi", max_tokens=4, min_tokens=8)
    with pytest.raises(gannet.InvalidArgumentError):
        engine.generate("hi", no_such_option=1)
    with pytest.raises(gannet.InvalidArgumentError):
        engine.generate(b"bytes are not a prompt")  # type: ignore[arg-type]
    # Found after submit (a token id outside the vocabulary): the request's ERROR event, raised
    # from the waiting call with its type.
    with pytest.raises(gannet.InvalidArgumentError):
        engine.generate([2, 10**8], max_tokens=2)
    with pytest.raises(gannet.InvalidArgumentError):
        list(engine.stream([2, 10**8], max_tokens=2))
    # The engine still serves.
    assert len(engine.generate("In the beginning", max_tokens=3).tokens) == 3


def test_early_stream_exit_cancels(engine):
    before = engine.stats.total_generated_tokens
    got = 0
    for ev in engine.stream("In the beginning", **LONG):
        got += 1
        if got == 3:
            break  # dropping the stream cancels the request
    s = _idle(engine)
    assert s.total_generated_tokens - before < 200, "the abandoned request kept generating"


def test_explicit_cancel_finishes_cancelled(engine):
    st = engine.stream("In the beginning", **LONG)
    first = next(st)
    assert first.type == "token"
    st.cancel()
    rest = list(st)
    assert rest[-1].type == "finish" and rest[-1].finish_reason == "cancelled"
    assert 1 + len(rest) - 1 < LONG["max_tokens"]
    with pytest.raises(gannet.NotFoundError):
        engine.cancel(st.request_id)  # finished: unknown to the engine
    _idle(engine)


def test_async_cancel(engine):
    async def main():
        task = asyncio.ensure_future(engine.agenerate("In the beginning", **LONG))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        n = 0
        async for _ in engine.astream("And God said", **LONG):
            n += 1
            if n == 2:
                break

    before = engine.stats.total_generated_tokens
    asyncio.run(main())
    s = _idle(engine)
    assert s.total_generated_tokens - before < 2 * 200


def test_close_and_context_manager():
    with gannet.Engine(TRAINED, backend="cpu", num_threads=THREADS) as e:
        st = e.stream("In the beginning", **LONG)
        next(st)
    assert e.closed
    # A request still running when the engine closed ends with a typed error, never a hang.
    with pytest.raises(gannet.FailedPreconditionError):
        list(st)
    with pytest.raises(gannet.FailedPreconditionError):
        e.generate("hi")
    with pytest.raises(gannet.FailedPreconditionError):
        _ = e.stats
    e.close()  # idempotent


def test_stats_and_model_info(engine):
    engine.generate("In the beginning", max_tokens=4)
    s = engine.stats
    assert s.backend == "cpu" and s.device_id == -1
    assert s.total_generated_tokens >= 4 and s.num_steps > 0
    assert s.max_model_len > 0 and s.kv_pages_total[0] > 0
    info = gannet.model_info(TRAINED)
    assert info["model_type"].startswith("gemma4") and info["has_tokenizer"] is True
    assert info["vocab_size"] == engine.tokenizer.vocab_size
    with pytest.raises(gannet.NotFoundError):
        gannet.model_info(str(TINY / "no-such-model"))


def test_load_progress_and_abort():
    seen = []
    with gannet.Engine(TRAINED, backend="cpu", num_threads=THREADS, progress=seen.append) as e:
        assert e.generate("In", max_tokens=1).tokens
    assert seen and seen[-1].fraction == pytest.approx(1.0) and seen[-1].stage

    class Stop(Exception):
        pass

    def abort(_p):
        raise Stop()

    with pytest.raises(Stop):
        gannet.Engine(TRAINED, backend="cpu", progress=abort)


def test_gil_released_while_waiting(engine):
    """Waiting never holds the GIL. ctypes releases it around every call through a CDLL (a PyDLL
    keeps it), so the poll thread inside gannet_engine_poll and a caller inside submit leave
    Python free; callers wait on queues, which release it too. (Timing it is unreliable on a
    loaded 2-core machine, so this checks the mechanism, and that Python runs meanwhile.)"""
    import ctypes

    from gannet import _ffi

    assert isinstance(_ffi.lib(), ctypes.CDLL) and not isinstance(_ffi.lib(), ctypes.PyDLL)
    worker = threading.Thread(target=engine.generate, args=("In the beginning",),
                              kwargs={"max_tokens": 64, "ignore_eos": True})
    worker.start()
    spins = 0
    while worker.is_alive():
        spins += 1
    worker.join()
    assert spins > 0


def test_deadline_and_queue_limit_raise_typed_errors(engine):
    # A deadline that passes mid-request: the request's ERROR event, raised as a TimeoutError.
    with pytest.raises(gannet.DeadlineExceededError) as info:
        engine.generate("In the beginning", deadline_ms=1, **LONG)
    assert isinstance(info.value, TimeoutError)
    # A full queue refuses at submit; a batch that meets it cancels what it submitted.
    with gannet.Engine(TRAINED, backend="cpu", num_threads=THREADS, max_queued_requests=1) as e:
        with pytest.raises(gannet.ResourceExhaustedError):
            e.generate(["In the beginning", "And God said"], **LONG)
        # The cancelled request's slot frees once the poll thread has taken its final event.
        deadline = time.monotonic() + 10
        while True:
            try:
                assert e.generate("In the beginning", max_tokens=2).finish_reason == "length"
                break
            except gannet.ResourceExhaustedError:
                assert time.monotonic() < deadline, "the cancelled request kept its queue slot"
                time.sleep(0.01)
    _idle(engine)


def test_log_to_python(caplog):
    import logging

    gannet.log_to_python(level=logging.INFO)
    try:
        with caplog.at_level(logging.INFO, logger="gannet"):
            with gannet.Engine(TRAINED, backend="cpu", num_threads=THREADS):
                pass
        msgs = [r.getMessage() for r in caplog.records if r.name == "gannet"]
        assert any("engine:" in m and "loaded in" in m for m in msgs), msgs
        assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "gannet")
    finally:
        gannet.log_to_stderr()
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="gannet"):
        with gannet.Engine(TRAINED, backend="cpu", num_threads=THREADS):
            pass
    assert not [r for r in caplog.records if r.name == "gannet"]  # back on stderr
