"""The README's Python example runs as written (inside a coroutine, as an application would)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


async def test_the_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "one Python example in the README"
    source = "async def example():\n" + textwrap.indent(blocks[0], "    ")
    namespace: dict = {}
    exec(compile(source, str(README), "exec"), namespace)
    await namespace["example"]()
    assert "word_count returned 2." in capsys.readouterr().out
