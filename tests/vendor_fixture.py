"""The vendor-style C models of tests/fixtures/vendor_models.c as a shared library.

Meson builds it and passes its path in APPROXMUL_VENDOR_MODELS; a plain
``pytest`` run (after ``pip install``) compiles it with ``cc -shared -fPIC``
into a temporary directory instead, and skips if no C compiler exists.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

SOURCE = pathlib.Path(__file__).resolve().parent / "fixtures" / "vendor_models.c"


@pytest.fixture(scope="session")
def vendor_models(tmp_path_factory):
    prebuilt = os.environ.get("APPROXMUL_VENDOR_MODELS")
    if prebuilt and os.path.isfile(prebuilt):
        return prebuilt
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build tests/fixtures/vendor_models.c")
    out = tmp_path_factory.mktemp("vendor") / "libvendor_models.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(SOURCE)], check=True)
    return str(out)
