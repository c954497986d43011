"""The code on docs/multipliers.md, metrics.md, evaluate.md, api.md, sweep.md and threads.md
runs (docstring examples run in test_docstrings.py)."""

import contextlib
import io
import pathlib
import re
import shutil

import pytest


DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def python_blocks(name):
    return re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)


@pytest.mark.parametrize("name", ["multipliers.md", "metrics.md", "evaluate.md", "api.md", "sweep.md",
                                  "threads.md"])
def test_doc_code_blocks_run(name, tmp_path, monkeypatch):
    if not (DOCS / name).is_file():
        pytest.skip("docs not shipped with this install")
    if name == "multipliers.md" and not shutil.which("cc"):
        pytest.skip("the C model example needs a C compiler")
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(name)
    assert blocks
    namespace, printed = {}, []
    for number, block in enumerate(blocks, 1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"{name} block {number}", "exec"), namespace)
        printed.append(out.getvalue())
    if name == "evaluate.md":
        check_evaluate_output(namespace, printed)


def table_rows(text):
    """{multiplier: [columns]} of a printed result table."""
    lines = text.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("multiplier"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip() or not line.split()[0].isidentifier() and ":" not in line:
            break  # the table ends where other output starts
        rows[line.split()[0]] = line.split()[1:]
    return rows


def check_evaluate_output(namespace, printed):
    """What docs/evaluate.md prints, against values computed here another way."""
    import numpy as np

    import approxmul_cffi as am
    from approxmul_cffi import nn
    from approxmul_cffi.datasets import load_digits
    from approxmul_cffi.evaluation import bundled_model
    from kernel_cases import drum_table

    v = np.arange(256)
    exact = np.outer(v, v)
    mine = ((v[:, None] >> 2) * (v[None, :] >> 2)) << 4
    # block 1: the table, then "top1 delta mae" of the user's multiplier
    rows = table_rows(printed[0])
    assert list(rows) == ["float", "exact", "mine", "drum4"]
    top1, delta, mae = (float(f) for f in printed[0].strip().splitlines()[-1].split())
    assert mae == 100 * np.abs(mine - exact).mean() / 2**16
    assert rows["mine"][:2] == [f"{mae:.4f}", f"{100 * np.abs(mine - exact).max() / 2**16:.4f}"]
    assert rows["drum4"][0] == f"{100 * np.abs(drum_table(8, 4) - exact).mean() / 2**16:.4f}"
    # top-1 through the nn front end: the same integer arithmetic, bit for bit
    q = nn.quantize(bundled_model(), load_digits("train")[0])
    x, y = load_digits("test")
    accuracy = {m: 100 * (q.predict(x, am.Multiplier.from_table(t)) == y).mean()
                for m, t in (("exact", exact), ("mine", mine))}
    assert top1 == pytest.approx(accuracy["mine"], abs=1e-9)  # a count of images, over 450
    assert delta == pytest.approx(accuracy["mine"] - accuracy["exact"], abs=1e-9)
    assert rows["mine"][2:4] == [f"{top1:.2f}", f"{delta:+.2f}"]
    with open("mine.csv") as csv:
        assert f"mine,all,{mae!r}," in csv.read()
    # block 2: a mixed assignment stays close to the exact network
    assert 0.95 < float(printed[1]) <= 1.0
    # block 3: labels are the float model's own predictions, so float is 100%
    rows = table_rows(printed[2])
    assert rows["float"][2] == "100.00" and rows["exact"][:2] == ["0.0000", "0.0000"]
    assert rows["drum:k=4"][0] == f"{100 * np.abs(drum_table(8, 4) - exact).mean() / 2**16:.4f}"


def test_readme_examples_show_what_they_say(tmp_path, monkeypatch):
    """README's Python blocks run; a value or printout in a line's trailing
    comment is what that line gives."""
    import ast
    import doctest

    import numpy as np

    from kernel_cases import drum_table
    from reference import table_matmul

    readme = DOCS.parent / "README.md"
    if not readme.is_file():
        pytest.skip("README not shipped with this install")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.S)
    assert len(blocks) == 2
    namespace, checked = {}, 0
    checker = doctest.OutputChecker()
    for block in blocks:
        lines = block.splitlines()
        for statement in ast.parse(block).body:
            code = "\n".join(lines[statement.lineno - 1:statement.end_lineno])
            source, _, comment = lines[statement.end_lineno - 1].partition("  #")
            comment = comment.strip()
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                if isinstance(statement, ast.Expr):
                    value = eval(compile(ast.Expression(statement.value), "README", "eval"),
                                 namespace)
                else:
                    exec(compile(code, "README", "exec"), namespace)
            if isinstance(statement, ast.Expr) and comment and not out.getvalue():
                assert value == ast.literal_eval(comment), source
                checked += 1
            elif out.getvalue():
                assert checker.check_output(comment + "\n", out.getvalue(), doctest.ELLIPSIS), \
                    (source, out.getvalue())
                checked += 1
        if "c" in namespace and "first" not in namespace:
            namespace["first"] = namespace["a"], namespace["b"], namespace["c"]
    assert checked == 2
    # the product the first block computes, from DRUM's own definition
    a, b, c = namespace["first"]
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c[:4], table_matmul(drum_table(8, 4), a[:4], b, 8))


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
