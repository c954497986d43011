"""The code on docs/multipliers.md and docs/metrics.md runs, and so do the
docstring examples of the multiplier-library modules."""

import doctest
import importlib
import pathlib
import re
import shutil

import pytest

import approxmul_cffi

# modules by name (approxmul_cffi.multiplier is the spec function)
MODULES = [importlib.import_module(f"approxmul_cffi.{name}")
           for name in ("multipliers", "specs", "formats", "vendor")]

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def python_blocks(name):
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["multipliers.md", "metrics.md"])
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


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module, tmp_path, monkeypatch):
    if module is MODULES[0] and not shutil.which("cc"):
        pytest.skip("from_c_function's example needs a C compiler")
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(module, extraglobs={"am": approxmul_cffi}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and (result.attempted > 0 or module in MODULES[2:])
