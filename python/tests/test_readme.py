"""The README's Python example runs as written (from the repository root)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO


def test_readme_python_example():
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)
    assert len(blocks) == 1, "the README's Python section should hold one ```python block"
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    p = subprocess.run([sys.executable, "-c", blocks[0]], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert " length 32\n" in p.stdout, p.stdout  # the chat answer: 32 tokens, greedy
    assert p.stderr == ""
