"""The example of docs/torch.md runs as written."""

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "torch.md"


def test_torch_md_example_runs(tmp_path, monkeypatch):
    if not DOC.is_file():
        pytest.skip("docs not shipped with this install")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"torch.md block {number}", "exec"), namespace)
    assert (tmp_path / "retrained.pt").is_file()
