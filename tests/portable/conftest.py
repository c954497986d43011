"""The portable test subset: needs only the standard library, cffi and pytest.

These tests run under every interpreter CI uses (CPython, and PyPy with and
without NumPy; see docs/testing.md), so they never import NumPy or
hypothesis: buffers are array.array, bytearray and memoryview. The full
suite in tests/ runs them too.
"""

import pathlib
import sys

# helper modules import by name under --import-mode=importlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
