"""The ABI's single source of truth: header, cffi declarations, exported symbols."""

import pathlib
import shutil
import textwrap
import subprocess
import sys

import numpy as np
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
    statuses = [getattr(lib, name) for name in dir(lib) if name.startswith("APPROXMUL_ERR_")]
    statuses.append(lib.APPROXMUL_OK)
    names = {ffi.string(lib.approxmul_status_string(code)) for code in statuses}
    assert len(names) == len(statuses)
    assert ffi.string(lib.approxmul_status_string(12345)) == b"unknown status"


def test_info_reports_the_build():
    from support import supported_isas
    facts = am.info()
    assert facts["version"] == am.__version__
    assert facts["abi"] == str(_cdef.ABI_VERSION)
    assert facts["isa"] == supported_isas()[-1]  # the best set the CPU's own flags allow
    assert facts["library"] == am.library_path() and pathlib.Path(facts["library"]).is_file()
    assert facts["openmp"] == ("yes" if openmp_runtime_loaded() else "no")


def openmp_runtime_loaded():
    """Whether an OpenMP runtime is mapped into this process (the library links it)."""
    with open("/proc/self/maps") as maps:
        return any(name in line for line in maps for name in ("libgomp", "libomp", "libiomp"))


def test_thread_count_takes_effect(python_runner):
    # a fresh process, so that OMP_NUM_THREADS sets the default
    code = textwrap.dedent("""
        import approxmul_cffi as am
        seen = [am.info()["openmp"], am.get_num_threads(), am.info()["threads"]]
        am.set_num_threads(5)
        seen += [am.get_num_threads(), am.info()["threads"]]
        am.set_num_threads(0)
        seen += [am.get_num_threads(), am.info()["threads"]]
        print(seen)
    """)
    result = python_runner(code, env={"OMP_NUM_THREADS": "3"})
    assert result.returncode == 0, result.stderr
    _, *counts = eval(result.stdout)
    # without OpenMP every kernel runs on the calling thread
    want = [3, "3", 5, "5", 3, "3"] if openmp_runtime_loaded() else [1, "1"] * 3
    assert counts == want


# each status of approxmul.h and the exception a Python user gets for it
STATUS_CLASSES = {
    "APPROXMUL_ERR_INVALID_ARGUMENT": (am.InvalidArgumentError, ValueError),
    "APPROXMUL_ERR_NULL_POINTER": (am.InvalidArgumentError, ValueError),
    "APPROXMUL_ERR_DTYPE": (am.DTypeError, TypeError),
    "APPROXMUL_ERR_SHAPE": (am.ShapeError, ValueError),
    "APPROXMUL_ERR_OVERFLOW": (am.AccumulatorOverflowError, OverflowError),
    "APPROXMUL_ERR_OUT_OF_RANGE": (am.OperandRangeError, ValueError),
    "APPROXMUL_ERR_ALIASING": (am.AliasingError, ValueError),
    "APPROXMUL_ERR_OUT_OF_MEMORY": (am.OutOfMemoryError, MemoryError),
    "APPROXMUL_ERR_UNSUPPORTED": (am.UnsupportedError, ValueError),
    "APPROXMUL_ERR_IO": (am.LibraryIOError, OSError),
    "APPROXMUL_ERR_FORMAT": (am.FormatError, ValueError),
    "APPROXMUL_ERR_CALLBACK": (am.CallbackError, RuntimeError),
    "APPROXMUL_ERR_CANCELLED": (am.errors.CancelledError, RuntimeError),
    "APPROXMUL_ERR_INTERNAL": (am.InternalError, RuntimeError),
}


@pytest.mark.parametrize("name", STATUS_CLASSES)
def test_every_status_raises_its_exception_with_the_status(name):
    from approxmul_cffi._library import check
    status = getattr(lib, name)
    lib.approxmul_set_num_threads(0)  # a success: no message left from earlier calls
    cls, builtin = STATUS_CLASSES[name]
    with pytest.raises(cls) as info:
        check(status)
    assert type(info.value) is cls and isinstance(info.value, builtin)
    assert info.value.status == status
    # without a C message, the status's own text
    assert str(info.value) == ffi.string(lib.approxmul_status_string(status)).decode()


def test_unknown_status_is_an_internal_error_that_keeps_the_code():
    from approxmul_cffi._library import check
    lib.approxmul_set_num_threads(0)
    with pytest.raises(am.InternalError, match="^unknown status$") as info:
        check(12345)
    assert info.value.status == 12345


def test_status_of_a_real_failure():
    with pytest.raises(am.ShapeError) as info:
        am.matmul(np.ones((2, 3), np.uint8), np.ones((2, 3), np.uint8), am.Multiplier.exact(8))
    assert info.value.status is None  # found in Python, before the C call
    with pytest.raises(am.OperandRangeError) as info:
        am.Multiplier.exact(8).product(256, 1)
    assert info.value.status == lib.APPROXMUL_ERR_OUT_OF_RANGE
    assert str(info.value).startswith("a: 256 ")


def test_every_status_raises_its_class_with_its_value():
    from approxmul_cffi import _library, errors

    names = {name for name in dir(lib) if name.startswith("APPROXMUL_ERR_")}
    assert names == set(errors.STATUS_CLASSES)  # a new status needs its class
    for name in names:
        error = _library.error_for(getattr(lib, name))
        assert type(error) is errors.STATUS_CLASSES[name] and error.status == getattr(lib, name)
    with pytest.raises(am.InvalidArgumentError) as info:
        am.Multiplier.exact(bits=99)
    assert info.value.status == lib.APPROXMUL_ERR_INVALID_ARGUMENT
