"""Helpers shared by the test modules (imported by name: ``from support import ...``)."""

import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_python(code, env=None, timeout=120):
    """Run Python code in a fresh interpreter with this one's import setup."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    # run outside the source tree, so the package imported is the one under test
    # (installed, or the one PYTHONPATH names), never ./approxmul_cffi by accident
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=tempfile.gettempdir())
