"""Files that declare sizes: checked against the bytes present and the caller's limit first.

Real files written by NumPy and zipfile, then damaged the way a download or a
hostile sender damages them.
"""

import io
import os
import resource
import zipfile

import numpy as np
import pytest

from approxmul_cffi import safe_files
from approxmul_cffi.errors import FormatError, LibraryIOError


def npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def huge_header(shape, dtype="<f4"):
    """A valid .npy header declaring ``shape``, followed by a few bytes of data."""
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(64)


@pytest.fixture
def small_address_space():
    # a regression that allocated what the header declares would fail here
    # with MemoryError instead of passing slowly
    if os.environ.get("APPROXMUL_SANITIZED"):
        # ASan reserves terabytes of address space for its shadow memory: no
        # limit there (the checks under test run all the same)
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(8 << 30, hard) if hard > 0 else 8 << 30, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_read_bounded_stops_at_the_limit(tmp_path):
    with pytest.raises(FormatError, match="/dev/zero: more than 131072 bytes.*device or pipe"):
        safe_files.read_bounded("/dev/zero", 131072, "a binary table")
    (tmp_path / "big.bin").write_bytes(bytes(131073))
    with pytest.raises(FormatError, match="131073 bytes, larger than a binary table"):
        safe_files.read_bounded(tmp_path / "big.bin", 131072, "a binary table")
    (tmp_path / "ok.bin").write_bytes(bytes(131072))
    assert len(safe_files.read_bounded(tmp_path / "ok.bin", 131072, "a binary table")) == 131072
    with pytest.raises(LibraryIOError, match="is a directory"):
        safe_files.read_bounded(tmp_path, 10, "x")
    with pytest.raises(LibraryIOError, match="cannot read"):
        safe_files.read_bounded(tmp_path / "missing", 10, "x")


@pytest.mark.parametrize("name, data, words", [
    ("objects.npy", npy_bytes(np.array([{"a": 1}, None], dtype=object)),
     ["pickled Python objects", "refused for safety"]),
    ("garbage.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': 'O'}\n" + b"x" * 40,
     ["corrupt header"]),
    ("notnpy.npy", b"hello world, not numpy at all", ["not a readable .npy"]),
    ("header.npy", b"\x93NUMPY\x01\x00\xff\x00{'descr': '<i4', 'shape': (4, 4" + b" " * 20,
     ["corrupt header"]),
    ("truncated.npy", npy_bytes(np.arange(16, dtype=np.int32).reshape(4, 4))[:-10],
     ["declares a 4 x 4 int32 array (64 bytes)", "holds 54 bytes", "truncated"]),
    ("huge.npy", huge_header((32000, 32000)),
     ["declares a 32000 x 32000 float32 array (4096000000 bytes)", "truncated or corrupt"]),
    ("fortran.npy", npy_bytes(np.asfortranarray(np.arange(6).reshape(2, 3))), ["Fortran-order"]),
])
def test_bad_npy_files(tmp_path, small_address_space, name, data, words):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(FormatError) as caught:
        safe_files.load_npy(tmp_path / name, max_bytes=1 << 20, what="a table")
    for word in words:
        assert word in str(caught.value), str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / name))
    assert "\n" not in str(caught.value) and "allow_pickle" not in str(caught.value)


def test_limit_and_good_arrays(tmp_path):
    np.save(tmp_path / "t.npy", np.arange(16, dtype=np.int64).reshape(4, 4))
    assert safe_files.load_npy(tmp_path / "t.npy", max_bytes=128, what="x").tolist()[3] == \
        [12, 13, 14, 15]
    with pytest.raises(FormatError, match="larger than a 64-byte thing can be"):
        safe_files.load_npy(tmp_path / "t.npy", max_bytes=64, what="a 64-byte thing")
    np.save(tmp_path / "empty.npy", np.zeros((0, 0), np.int32))
    assert safe_files.load_npy(tmp_path / "empty.npy", max_bytes=64, what="x").shape == (0, 0)


def test_bad_npz_archives(tmp_path, small_address_space):
    np.savez(tmp_path / "good.npz", table=np.arange(4).reshape(2, 2))
    whole = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "trunc.npz").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(FormatError, match="trunc.npz: not a readable .npz archive"):
        safe_files.load_npz(tmp_path / "trunc.npz", max_bytes=1 << 20, what="x")
    with zipfile.ZipFile(tmp_path / "objects.npz", "w") as archive:
        archive.writestr("table.npy", npy_bytes(np.array([None], dtype=object)))
    with pytest.raises(FormatError, match=r"objects.npz\[table.npy\]: holds pickled"):
        safe_files.load_npz(tmp_path / "objects.npz", max_bytes=1 << 20, what="x")
    with zipfile.ZipFile(tmp_path / "huge.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("w.npy", huge_header((32000, 32000)))
    with pytest.raises(FormatError, match=r"huge.npz\[w.npy\]: declares a 32000 x 32000"):
        safe_files.npz_headers(tmp_path / "huge.npz")
    with zipfile.ZipFile(tmp_path / "other.npz", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(FormatError, match="not a .npy member"):
        safe_files.npz_headers(tmp_path / "other.npz")
    np.savez(tmp_path / "two.npz", a=np.zeros(100, np.int64), b=np.zeros(100, np.int64))
    with pytest.raises(FormatError, match="1600 bytes, more than"):
        safe_files.load_npz(tmp_path / "two.npz", max_bytes=1000, what="x")
    assert list(safe_files.load_npz(tmp_path / "two.npz", max_bytes=1000, what="x",
                                    names=["a"])) == ["a"]
    assert safe_files.npz_headers(tmp_path / "two.npz")["b"][0] == (100,)
