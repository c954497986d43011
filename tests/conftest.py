import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# test helper modules (reference.py, ...) import by name under --import-mode=importlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def run_python(code, env=None, timeout=120):
    """Run Python code in a fresh interpreter with this one's import setup."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    # run outside the source tree, so the package imported is the one under test
    # (installed, or the one PYTHONPATH names), never ./approxmul_cffi by accident
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=tempfile.gettempdir())


@pytest.fixture
def python_runner():
    return run_python
