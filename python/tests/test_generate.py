"""Outputs of the Python API equal the CLI's for the same request, and its paths (generate,
stream, batch, asyncio) equal each other."""

from __future__ import annotations

import asyncio
import threading

import pytest

import gannet
from conftest import DATA, THREADS, TINY, TRAINED, run_cli

# (name, model, CLI flags, Python prompt, Python sampling keywords)
CASES = [
    ("chat", TRAINED, ["--chat", "-p", "Hello there, who are you?", "-n", "16"],
     [{"role": "user", "content": "Hello there, who are you?"}], {"max_tokens": 16}),
    ("system+chat", TRAINED, ["--system", "Be brief.", "-p", "Who made the heaven?", "-n", "20"],
     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who made the heaven?"}],
     {"max_tokens": 20}),
    ("text", TRAINED, ["-p", "In the beginning God", "-n", "24"], "In the beginning God",
     {"max_tokens": 24}),
    ("token ids, ignore eos", TRAINED, ["--prompt-ids", "2,120,130,140", "-n", "12", "--ignore-eos"],
     [2, 120, 130, 140], {"max_tokens": 12, "ignore_eos": True}),
    ("stop string", TRAINED, ["-p", "And God said", "-n", "40", "--stop", " the"], "And God said",
     {"max_tokens": 40, "stop": " the"}),
    ("sampled with a seed", TRAINED,
     ["-p", "The LORD is", "-n", "16", "--temp", "0.9", "--top-k", "50", "--top-p", "0.95",
      "--seed", "1234"],
     "The LORD is", {"max_tokens": 16, "temperature": 0.9, "top_k": 50, "top_p": 0.95, "seed": 1234}),
    # The tiny random models think (emit <|channel> ... <channel|>) on these prompts.
    ("chat with thinking, e4b", str(TINY / "e4b"),
     ["--chat", "--thinking", "-p", "Reason step by step", "-n", "48"],
     [{"role": "user", "content": "Reason step by step"}], {"max_tokens": 48, "enable_thinking": True}),
    ("chat with thinking, e2b", str(TINY / "e2b"),
     ["--chat", "--thinking", "-p", "Hi", "-n", "48"],
     [{"role": "user", "content": "Hi"}], {"max_tokens": 48, "enable_thinking": True}),
    ("text, e2b", str(TINY / "e2b"), ["-p", "The quick brown fox", "-n", "8", "--ignore-eos"],
     "The quick brown fox", {"max_tokens": 8, "ignore_eos": True}),
]


def _same_as_cli(c: gannet.Completion, want: dict) -> None:
    assert c.tokens == want["tokens"]
    assert c.text == want["text"]
    assert c.thinking == want["thinking"]
    assert c.finish_reason == want["finish"]
    assert c.usage.prompt_tokens == want["prompt_tokens"]
    assert c.usage.completion_tokens == want["generated_tokens"] == len(c.tokens)


# Engine config for a case, by name (the CLI flags above say the same).
CONFIGS = {
    "speculative, trained": {"draft_model_dir": str(TINY / "trained-assistant"),
                             "num_speculative_tokens": 2},
}
CASES.append(
    ("speculative, trained", TRAINED,
     ["--draft", str(TINY / "trained-assistant"), "--spec-tokens", "2", "-p", "And Jesus said",
      "-n", "24", "--ignore-eos"],
     "And Jesus said", {"max_tokens": 24, "ignore_eos": True}))


@pytest.mark.parametrize("name,model,flags,prompt,sampling", CASES, ids=[c[0] for c in CASES])
def test_generate_equals_cli(cli, name, model, flags, prompt, sampling):
    want = run_cli(cli, "-m", model, *flags)
    assert want["tokens"], f"{name}: the CLI generated nothing"
    if "thinking" in name:
        assert want["thinking"], f"{name}: the case no longer thinks; pick another prompt"
    with gannet.Engine(model, backend="cpu", num_threads=THREADS, **CONFIGS.get(name, {})) as e:
        got = e.generate(prompt, **sampling)
        _same_as_cli(got, want)
        if name in CONFIGS:  # speculation ran, with the CLI's drafts
            assert got.usage.draft_tokens == want["draft_tokens"] > 0
            assert got.usage.accepted_draft_tokens == want["accepted_draft_tokens"]
        # Streaming gives the same tokens and text, split into events.
        events = list(e.stream(prompt, **sampling))
    assert [ev.type for ev in events[:-1]] == ["token"] * (len(events) - 1)
    assert events[-1].type == "finish" and events[-1].finish_reason == want["finish"]
    assert [ev.token_id for ev in events[:-1]] == want["tokens"]
    assert "".join(ev.text for ev in events if not ev.thinking) == want["text"]
    assert "".join(ev.text for ev in events if ev.thinking) == want["thinking"]
    assert events[-1].usage == got.usage or events[-1].usage.cached_prompt_tokens > 0


def test_logprobs_equal_cli(cli, engine):
    want = run_cli(cli, "-m", TRAINED, "-p", "In the beginning", "-n", "6", "--logprobs", "3")
    got = engine.generate("In the beginning", max_tokens=6, logprobs=3)
    assert got.tokens == want["tokens"]
    assert got.logprobs is not None and len(got.logprobs) == len(want["logprobs"])
    for g, w in zip(got.logprobs, want["logprobs"]):
        assert g.token_id == w["id"]
        assert g.logprob == pytest.approx(w["logprob"], abs=1e-5)
        assert [t.token_id for t in g.top] == [t["id"] for t in w["top"]]
        assert [t.logprob for t in g.top] == pytest.approx([t["logprob"] for t in w["top"]], abs=1e-5)


PROMPTS = ["In the beginning God", "And the LORD spake unto Moses", [2, 120, 130, 140],
           [{"role": "user", "content": "Who is the king?"}], "Blessed is the man"]


def test_batch_equals_one_by_one_and_runs_together(engine):
    singles = []
    steps_alone = 0
    for p in PROMPTS:
        before = engine.stats.num_steps
        singles.append(engine.generate(p, max_tokens=12, ignore_eos=True))
        steps_alone += engine.stats.num_steps - before
    before = engine.stats.num_steps
    batch = engine.generate(PROMPTS, max_tokens=12, ignore_eos=True)
    steps_batch = engine.stats.num_steps - before
    assert isinstance(batch, list) and len(batch) == len(PROMPTS)
    for s, b in zip(singles, batch):
        assert b.tokens == s.tokens and b.text == s.text and b.finish_reason == s.finish_reason
        assert len(b.tokens) == 12
    # Submitted together, the requests share the engine's steps: 5 x 12 tokens alone take at least
    # 60 steps, together about 12 plus their prefills.
    assert steps_batch * 2 < steps_alone, (steps_batch, steps_alone)


def test_stream_equals_generate_from_threads(engine):
    """Several threads streaming at once each get what generate gives alone."""
    alone = [engine.generate(p, max_tokens=10) for p in PROMPTS]
    results: dict[int, list[int]] = {}

    def run(i: int) -> None:
        results[i] = [ev.token_id for ev in engine.stream(PROMPTS[i], max_tokens=10) if ev.type == "token"]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [results[i] for i in range(len(PROMPTS))] == [a.tokens for a in alone]


def test_async_generate_stream_and_batch(engine):
    alone = [engine.generate(p, max_tokens=10) for p in PROMPTS]

    async def main():
        one = await engine.agenerate(PROMPTS[0], max_tokens=10)
        many = await asyncio.gather(*(engine.agenerate(p, max_tokens=10) for p in PROMPTS))
        batch = await engine.agenerate(PROMPTS, max_tokens=10)
        streamed = []
        async for ev in engine.astream(PROMPTS[1], max_tokens=10):
            streamed.append(ev)
        return one, many, batch, streamed

    one, many, batch, streamed = asyncio.run(main())
    assert one.tokens == alone[0].tokens
    assert [m.tokens for m in many] == [a.tokens for a in alone]
    assert [b.tokens for b in batch] == [a.tokens for a in alone]
    assert [ev.token_id for ev in streamed if ev.type == "token"] == alone[1].tokens
    assert streamed[-1].type == "finish" and streamed[-1].usage.completion_tokens == 10


def test_an_image_in_a_chat_answers_as_hf():
    """HF's greedy tokens for this PNG and chat (tests/data/golden/mm-api.json,
    tools/golden/mm_api_golden.py); a truncated image is refused naming it."""
    import json as _json

    import gannet

    golden = _json.loads((DATA / "golden" / "mm-api.json").read_text())
    png = (DATA / "images" / golden["image"]).read_bytes()
    chat = [{"role": "user", "content": "<|image|>What is in this picture?"}]
    with gannet.Engine(str(TINY / "mm-api"), backend="cpu", num_threads=THREADS,
                       max_model_len=256) as e:
        got = e.generate(chat, images=[png], image_tokens=golden["max_soft_tokens"],
                         max_tokens=16, ignore_eos=True)
        assert got.tokens == golden["greedy"]
        with pytest.raises(gannet.InvalidArgumentError, match=r"images\[0\]"):
            e.generate(chat, images=[png[:100]], image_tokens=70, max_tokens=1)
