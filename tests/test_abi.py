"""The ABI's single source of truth: header, cffi declarations, exported symbols."""

import pathlib
import shutil
import subprocess
import sys

import pytest

import approxmul_cffi as am
from approxmul_cffi import _cdef
from approxmul_cffi._library import ffi, lib

from support import ROOT
sys.path.insert(0, str(ROOT / "capi"))
import gen_cdef  # noqa: E402

HEADER = ROOT / "capi" / "include" / "approxmul.h"


def test_cdef_is_generated_from_the_header():
    assert _cdef.CDEF == gen_cdef.declarations(HEADER.read_text()), \
        "approxmul_cffi/_cdef.py drifted from the header: run python capi/gen_cdef.py"
    assert (ROOT / "approxmul_cffi" / "_cdef.py").read_text() == \
        gen_cdef.module_text(HEADER.read_text())


def test_every_declared_function_is_bound():
    names = gen_cdef.function_names(_cdef.CDEF)
    assert "approxmul_matmul" in names and len(names) == len(set(names))
    for name in names:
        assert callable(getattr(lib, name)), name


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is not installed")
def test_exported_symbols_equal_the_declared_api():
    result = subprocess.run(
        [sys.executable, str(ROOT / "capi" / "tests" / "check_symbols.py"), am.library_path(),
         str(HEADER)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_abi_and_version():
    assert lib.approxmul_abi_version() == _cdef.ABI_VERSION == lib.APPROXMUL_ABI_VERSION
    assert am.__version__ == ffi.string(lib.approxmul_version_string()).decode()
    assert am.__version__.count(".") == 2


def test_status_strings_are_distinct():
    statuses = list(range(14)) + [99]
    names = {ffi.string(lib.approxmul_status_string(code)) for code in statuses}
    assert len(names) == len(statuses)
    assert ffi.string(lib.approxmul_status_string(12345)) == b"unknown status"


def test_info_reports_the_build():
    facts = am.info()
    assert facts["version"] == am.__version__
    assert facts["abi"] == str(_cdef.ABI_VERSION)
    assert facts["openmp"] in ("yes", "no")
    assert facts["isa"]
    assert facts["library"] == am.library_path()
