import pathlib
import sys

import pytest

# test helper modules (support.py, reference.py, ...) import by name under
# --import-mode=importlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from support import run_python  # noqa: E402


@pytest.fixture
def python_runner():
    return run_python
