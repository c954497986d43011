"""The command line without NumPy: --help, info and metrics work; the rest name the extra.

NumPy is hidden from a child interpreter by an import hook, so this runs the
same with or without NumPy installed (CI's PyPy job has none at all).
"""

import os
import subprocess
import sys
import tempfile

import pytest

HIDE_NUMPY = """
import sys
class HideNumpy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "numpy":
            raise ModuleNotFoundError("No module named 'numpy'", name="numpy")
sys.meta_path.insert(0, HideNumpy())
from approxmul_cffi.cli import main
sys.exit(main(sys.argv[1:]))
"""


def approxmul(*args):
    return subprocess.run([sys.executable, "-c", HIDE_NUMPY, *args], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir(),
                          env=dict(os.environ))


@pytest.mark.parametrize("args", [["--help"], ["info"], ["info", "--json"], ["metrics", "--help"],
                                  ["show", "--help"], ["evaluate", "--help"], ["layers", "--help"]])
def test_works_without_numpy(args):
    out = approxmul(*args)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""


def test_metrics_without_numpy():
    out = approxmul("metrics", "drum:k=4", "mitchell")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].split()[0] == "drum:bits=8,signed=0,k=4" and lines[1].split()[3] == "7425"
    assert lines[2].split()[:2] == ["mitchell:bits=8,signed=0", "606.4"]


@pytest.mark.parametrize("args, extra", [
    (["evaluate", "--limit", "5"], "approxmul[numpy]"),
    (["layers"], "approxmul[numpy]"),
    (["show", "mitchell", "--out", "x.png"], "approxmul[plot]"),
])
def test_commands_needing_numpy_name_the_extra(args, extra):
    out = approxmul(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert f"approxmul {args[0]}: error:" in out.stderr and extra in out.stderr
    assert "NumPy" in out.stderr
