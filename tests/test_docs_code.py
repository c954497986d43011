"""The code on docs/multipliers.md, docs/metrics.md, docs/evaluate.md and docs/threads.md runs
(docstring examples run in test_docstrings.py)."""

import pathlib
import re
import shutil

import pytest


DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def python_blocks(name):
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["multipliers.md", "metrics.md", "evaluate.md", "threads.md"])
def test_doc_code_blocks_run(name, tmp_path, monkeypatch):
    if not (DOCS / name).is_file():
        pytest.skip("docs not shipped with this install")
    if name == "multipliers.md" and not shutil.which("cc"):
        pytest.skip("the C model example needs a C compiler")
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(name)
    assert blocks
    namespace = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"{name} block {number}", "exec"), namespace)
