"""The tokenizer calls: the same tokens and prompts the engine uses."""

from __future__ import annotations

import pytest

import gannet
from conftest import TINY, TRAINED


def test_encode_decode_round_trip(engine):
    tok = engine.tokenizer
    ids = tok.encode("In the beginning God created the heaven")
    assert ids[0] == tok.bos_id
    assert tok.decode(ids, skip_special_tokens=True) == "In the beginning God created the heaven"
    assert tok.decode(ids).startswith("<bos>")
    assert tok.encode("", add_special_tokens=False) == []
    assert b"".join(tok.token_to_piece(i) for i in ids[1:]) == b"In the beginning God created the heaven"
    # The engine counts the same prompt tokens.
    c = engine.generate("In the beginning God created the heaven", max_tokens=1)
    assert c.usage.prompt_tokens == len(ids)


def test_chat_template_matches_engine(engine):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who is the king?"}]
    tok = engine.tokenizer
    text = tok.apply_chat_template(msgs)
    assert text.startswith("<bos>") and "Who is the king?" in text
    ids = tok.encode(text, add_special_tokens=False)
    by_messages = engine.generate(msgs, max_tokens=8)
    by_ids = engine.generate(ids, max_tokens=8)
    assert by_messages.usage.prompt_tokens == len(ids)
    assert by_messages.tokens == by_ids.tokens
    no_opener = tok.apply_chat_template(msgs, add_generation_prompt=False)
    assert text.startswith(no_opener) and len(no_opener) < len(text)
    assert tok.start_of_turn_id in ids and tok.end_of_turn_id in ids


def test_standalone_tokenizer():
    with gannet.Tokenizer.open(TRAINED) as tok:
        assert tok.vocab_size > 0
        assert tok.decode(tok.encode("Amen")) == "<bos>Amen"
    with pytest.raises(gannet.FailedPreconditionError):
        tok.encode("closed")
    with pytest.raises(gannet.NotFoundError):
        gannet.Tokenizer.open(str(TINY / "no-such-model"))


def test_model_without_tokenizer(tmp_path):
    """A folder without tokenizer.json loads (token-id prompts only) and has no tokenizer."""
    import os

    for f in ("config.json", "model.safetensors"):
        os.symlink(os.path.join(TRAINED, f), tmp_path / f)
    with gannet.Engine(str(tmp_path), backend="cpu", num_threads=2) as e:
        with pytest.raises(gannet.NotFoundError):
            _ = e.tokenizer
        with pytest.raises(gannet.FailedPreconditionError):
            e.generate("text needs a tokenizer", max_tokens=2)
        assert len(e.generate([2, 120, 130], max_tokens=3, ignore_eos=True).tokens) == 3
