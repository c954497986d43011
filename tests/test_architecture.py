"""The package's shape: every module imports alone, no import cycles, files stay small."""

import ast
import pathlib
import pkgutil

import pytest

import approxmul_cffi
from support import run_python

PACKAGE = pathlib.Path(approxmul_cffi.__file__).parent
MAX_LINES = 450


def modules():
    names = ["approxmul_cffi"]
    for info in pkgutil.walk_packages(approxmul_cffi.__path__, "approxmul_cffi."):
        names.append(info.name)
    return [n for n in names if (PACKAGE.parent / (n.replace(".", "/") + ".py")).exists()
            or (PACKAGE.parent / n.replace(".", "/") / "__init__.py").exists()]


def source(name):
    path = PACKAGE.parent / (name.replace(".", "/") + ".py")
    return path if path.exists() else PACKAGE.parent / name.replace(".", "/") / "__init__.py"


def imported_modules(name):
    """Package modules ``name`` imports anywhere in its source (function bodies too)."""
    path = source(name)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("approxmul_cffi"))
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level \
                else node.module
            if not target or not target.startswith("approxmul_cffi"):
                continue
            # "from . import x" names submodules; "from .m import f" the module m
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(target)
    found.discard(name)
    return {m for m in found if m in MODULES}


MODULES = set(modules())


def test_no_import_cycles():
    graph = {name: imported_modules(name) for name in MODULES}
    graph["approxmul_cffi"].clear()  # the root re-exports; nothing below may import it back
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join(path + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for name in sorted(MODULES):
        if name not in state:
            visit(name, [name])


def test_library_modules_do_not_reach_back_through_the_package_root():
    # the command line is the top layer and may use the public root
    below = [n for n in MODULES if n != "approxmul_cffi" and not n.startswith("approxmul_cffi.cli")]
    offenders = {n: "approxmul_cffi" for n in below if "approxmul_cffi" in imported_modules(n)}
    assert offenders == {}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith("__main__")))
def test_every_module_imports_alone(name):
    result = run_python(f"import {name}")
    assert result.returncode == 0, result.stderr


def test_no_file_is_too_long():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if not p.name.startswith("_cdef") and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
