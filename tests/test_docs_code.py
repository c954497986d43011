"""The code on docs/multipliers.md, metrics.md, evaluate.md, api.md and sweep.md runs (docstring
examples run in test_docstrings.py)."""

import pathlib
import re
import shutil

import pytest


DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def python_blocks(name):
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["multipliers.md", "metrics.md", "evaluate.md", "api.md", "sweep.md"])
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


def test_files_the_docs_cite_exist():
    # a doc naming a test or script that does not exist sends readers nowhere
    root = DOCS.parent
    pages = sorted(DOCS.glob("*.md")) + [root / "README.md"]
    if not (root / "README.md").is_file():
        pytest.skip("docs not shipped with this install")
    cited = set()
    for page in pages:
        for path in re.findall(r"`((?:tests|capi|benchmarks|scripts|\.ci|docs)/[\w./-]+"
                               r"\.(?:py|sh|c|cpp|hpp|h|md|map|json))`", page.read_text()):
            cited.add((page.name, path))
    assert cited  # the pattern still matches how the docs cite files
    missing = [(page, path) for page, path in sorted(cited) if not (root / path).exists()]
    assert not missing, missing
