"""Fixtures of the gannet Python tests: the tiny models, the CLI to compare with, one engine.

ctest (tests/python) sets GANNET_LIBRARY (the build's libgannet.so), GANNET_CLI (its `gannet`),
GANNET_ABI_SIZES (tests/examples/abi_sizes.c built) and GANNET_TEST_DATA; run by hand, set them
the same way, or the tests needing them skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("GANNET_TEST_DATA", REPO / "tests" / "data"))
TINY = DATA / "tiny"
TRAINED = str(TINY / "trained")
THREADS = 2  # the CI machine's cores; the CLI runs with the same

# Paths given relative to where pytest started stay right in subprocesses run elsewhere.
for _var in ("GANNET_LIBRARY", "GANNET_CLI", "GANNET_ABI_SIZES"):
    if os.environ.get(_var):
        os.environ[_var] = os.path.abspath(os.environ[_var])


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("GANNET_CLI")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("GANNET_CLI is not set to the gannet CLI")
    return path


def run_cli(cli: str, *args: str) -> dict[str, Any]:
    """`gannet generate ARGS --json -q` on the CPU backend; its JSON object."""
    cmd = [cli, "generate", *args, "--backend", "cpu", "-t", str(THREADS), "--json", "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{cmd} failed ({p.returncode}): {p.stderr}"
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def engine():
    import gannet

    with gannet.Engine(TRAINED, backend="cpu", num_threads=THREADS) as e:
        yield e
