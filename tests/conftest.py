import importlib.util
import os
import pathlib
import sys

import pytest

# test helper modules (support.py, reference.py, ...) import by name under
# --import-mode=importlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def _prefer_the_installed_package():
    """``python -m pytest`` puts the working directory first on sys.path.

    From the repository root that would import ./approxmul_cffi, which holds
    no built library (LibraryNotFoundError), instead of the installed
    package that plain ``pytest`` finds. Unless APPROXMUL_LIBRARY points at a
    built library (the development route), the source folder leaves the path
    when an installed copy exists.
    """
    root = pathlib.Path(__file__).resolve().parent.parent
    if os.environ.get("APPROXMUL_LIBRARY") or any((root / "approxmul_cffi").glob("*approxmul.*")):
        return
    kept = [p for p in sys.path if pathlib.Path(p or ".").resolve() != root]
    saved, sys.path[:] = sys.path[:], kept
    spec = importlib.util.find_spec("approxmul_cffi")
    if spec is None or spec.origin is None:
        sys.path[:] = saved  # nothing installed: the library error will say what to do


_prefer_the_installed_package()

from support import run_python  # noqa: E402


@pytest.fixture
def python_runner():
    return run_python


@pytest.fixture(scope="module")
def client():
    """A Dask client of a LocalCluster with two worker processes, one per test module."""
    import distributed  # the test extra installs dask[distributed]

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    with distributed.Client(cluster, set_as_default=False) as c:
        yield c
    cluster.close()


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
