import os
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With APPROXMUL_FORBID_SKIPS set (CI's main job), a skip is a failure: every
    skip in this suite is for something CI has (docs/testing.md)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("APPROXMUL_FORBID_SKIPS") and \
            not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped where skips are forbidden (APPROXMUL_FORBID_SKIPS): " \
                          f"{report.longrepr}"
