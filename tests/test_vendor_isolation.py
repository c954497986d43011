"""Vendor C models that crash, exit, abort or hang cost an error, not the process.

Real shared libraries built from tests/fixtures/hostile_models.c. Models of
up to 8 bits are tabulated in a child process by default; symbols that name
data are refused before anything calls them (docs/security.md).
"""

import os
import pathlib
import shutil
import subprocess

import pytest

import approxmul_cffi as am
from approxmul_cffi import vendor
from vendor_fixture import vendor_models  # noqa: F401 (fixture)

SOURCE = pathlib.Path(__file__).resolve().parent / "fixtures" / "hostile_models.c"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.skip("no C compiler to build tests/fixtures/hostile_models.c")
    out = tmp_path_factory.mktemp("hostile") / "libhostile.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(SOURCE)],
                   check=True)
    return str(out)


@pytest.mark.parametrize("symbol, words", [
    ("mul8u_segfault", ["crashed with SIGSEGV"]),
    ("mul8u_abort", ["crashed with SIGABRT"]),
    ("mul8u_exit", ["ended its process (exit status 3)"]),
    ("mul8u_exit0", ["ended its process (exit status 0)"]),
])
def test_faults_become_errors_naming_the_symbol(hostile, symbol, words):
    with pytest.raises(am.CallbackError) as caught:
        am.Multiplier.from_c_function(hostile, symbol, "u8")
    message = str(caught.value)
    assert f"vendor model {symbol!r} in {hostile}" in message
    if os.environ.get("APPROXMUL_SANITIZED") and symbol == "mul8u_segfault":
        # the child inherits the preloaded AddressSanitizer, which reports a
        # segfault and then aborts (abort_on_error=1)
        words = ["crashed with SIGABRT"]
    for word in words:
        assert word in message


def test_endless_loop_times_out(hostile):
    with pytest.raises(am.CallbackError, match=r"'mul8u_endless'.*more than 2 s.*endless loop"):
        am.Multiplier.from_c_function(hostile, "mul8u_endless", "u8", timeout=2)


def test_a_working_model_in_the_same_library_is_exact(hostile):
    m = am.Multiplier.from_c_function(hostile, "mul8u_fine", "u8")
    assert [m.product(a, b) for a, b in [(0, 0), (255, 255), (17, 3)]] == [0, 65025, 51]
    assert m.spec == f"c:{hostile}:mul8u_fine:u8?bits=8&signed=0"
    # the child process computes exactly what the in-process route does
    direct = am.Multiplier.from_c_function(hostile, "mul8u_fine", "u8", isolate=False)
    assert bytes(memoryview(m.table()).cast("B")) == bytes(memoryview(direct.table()).cast("B"))


def test_library_errors_keep_their_class_through_the_child(hostile, vendor_models):  # noqa: F811
    with pytest.raises(am.OperandRangeError, match="outside the 16-bit unsigned product range"):
        am.Multiplier.from_c_function(vendor_models, "mul8u_overflow", "u16", bits=8)
    with pytest.raises(am.InvalidArgumentError, match="'nope' not found"):
        am.Multiplier.from_c_function(hostile, "nope", "u8")


@pytest.mark.parametrize("isolate", [True, False])
@pytest.mark.parametrize("symbol, signature", [("mul8u_table", "u8"),
                                               ("mul16u_data_too", "u16")])
def test_data_symbols_are_refused(hostile, symbol, signature, isolate):
    with pytest.raises(am.InvalidArgumentError, match=f"{symbol}.*is a data object, not a function"):
        am.Multiplier.from_c_function(hostile, symbol, signature, isolate=isolate)


def test_elf_symbol_kinds(hostile):
    assert vendor.elf_symbol_kind(hostile, "mul8u_fine") == "function"
    assert vendor.elf_symbol_kind(hostile, "mul8u_table") == "a data object"
    assert vendor.elf_symbol_kind(hostile, "absent") is None
    assert vendor.elf_symbol_kind(hostile, "exit") is None  # imported, not defined here
    assert vendor.elf_symbol_kind(str(SOURCE), "mul8u_fine") is None  # not ELF


def test_directory_is_named_as_such(tmp_path):
    with pytest.raises(am.LibraryIOError, match="is a directory, not a shared library"):
        am.Multiplier.from_c_function(tmp_path, "f", "u8")
