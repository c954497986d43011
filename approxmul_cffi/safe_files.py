"""Reading files whose sizes the file itself declares, without trusting them.

A table or model file says how big it is: a ``.npy`` header declares a shape,
a zip directory an uncompressed size, a model a layer's features; a device
like /dev/zero has no end at all. Everything here checks such declarations
against the bytes actually present and against a limit chosen by the caller
(the largest the format can be) before allocating, and reports one line
naming the file. Pickled objects are never loaded.
"""

import math
import os
import stat
import zipfile

from .errors import FormatError, LibraryIOError


def read_bounded(path, limit, what):
    """The bytes of ``path``, refused beyond ``limit`` bytes (the largest ``what`` can be).

    >>> read_bounded("/dev/zero", 1024, "a 1 KiB thing")
    Traceback (most recent call last):
    ...
    approxmul_cffi.errors.FormatError: /dev/zero: more than 1024 bytes, larger than a 1 KiB thing can be (not a regular file: a device or pipe?)
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            info = os.fstat(f.fileno())
            regular = stat.S_ISREG(info.st_mode)
            if regular and info.st_size > limit:
                raise FormatError(f"{name}: {info.st_size} bytes, larger than {what} can be "
                                  f"({limit} bytes at most)")
            # never more than the limit, whatever the file claims; a regular file's
            # size bounds the buffer (read(n) allocates n bytes up front)
            data = f.read(min(limit, info.st_size) + 1 if regular else limit + 1)
    except IsADirectoryError:
        raise LibraryIOError(f"{name} is a directory, not a file") from None
    except OSError as error:
        raise LibraryIOError(f"cannot read {name}: {error.strerror or error}") from None
    if len(data) > limit:
        raise FormatError(f"{name}: more than {limit} bytes, larger than {what} can be"
                          + ("" if regular else " (not a regular file: a device or pipe?)"))
    return data


def _describe(shape, dtype):
    return f"{' x '.join(map(str, shape)) or 'scalar'} {dtype} array"


def read_npy_header(stream, name, available):
    """(shape, dtype, data offset) of the .npy data in ``stream``, checked against ``available`` bytes."""
    import numpy as np
    from numpy.lib import format as npy

    start = stream.tell()
    try:
        version = npy.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(stream)
        else:
            raise ValueError(f"format version {version} is not supported")
    except Exception as error:  # NumPy's header parser fails in many ways on garbage
        raise FormatError(f"{name}: not a readable .npy array (corrupt header: "
                          f"{str(error).splitlines()[0] if str(error) else type(error).__name__})"
                          ) from None
    if dtype.hasobject:
        raise FormatError(f"{name}: holds pickled Python objects (dtype {dtype}); refused for "
                          f"safety, since unpickling can run arbitrary code")
    offset = stream.tell() - start
    if fortran and len(shape) > 1:  # column-major data: read as the reversed shape, transposed
        raise FormatError(f"{name}: a Fortran-order (column-major) array; save it in C order "
                          f"(numpy.ascontiguousarray) first")
    declared = math.prod(shape) * dtype.itemsize
    if declared > available - offset:
        raise FormatError(f"{name}: declares a {_describe(shape, dtype)} ({declared} bytes) but "
                          f"holds {max(0, available - offset)} bytes of data (truncated or "
                          f"corrupt)")
    return tuple(int(s) for s in shape), np.dtype(dtype), offset


def _read_data(stream, name, shape, dtype):
    import numpy as np

    count = math.prod(shape)
    data = stream.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise FormatError(f"{name}: data ends after {len(data)} of {count * dtype.itemsize} "
                          f"bytes (truncated)")
    return np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()


def load_npy(path, *, max_bytes, what):
    """A .npy array, its header checked (no objects, sizes present, at most ``max_bytes``) first."""
    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        with open(name, "rb") as f:
            shape, dtype, _ = read_npy_header(f, name, size)
            _check_limit(name, shape, dtype, max_bytes, what)
            return _read_data(f, name, shape, dtype)
    except IsADirectoryError:
        raise LibraryIOError(f"{name} is a directory, not a file") from None
    except FileNotFoundError as error:
        raise LibraryIOError(f"cannot read {name}: {error.strerror}") from error
    except OSError as error:
        raise LibraryIOError(f"cannot read {name}: {error.strerror or error}") from None


def _check_limit(name, shape, dtype, max_bytes, what):
    declared = math.prod(shape) * dtype.itemsize
    if declared > max_bytes:
        raise FormatError(f"{name}: a {_describe(shape, dtype)} ({declared} bytes) is larger "
                          f"than {what} can be ({max_bytes} bytes at most)")


def npz_headers(path):
    """{array name: (shape, dtype)} of a .npz archive, read from headers only.

    Every member must be a .npy array without objects whose declared size
    fits the member's stored size.
    """
    name = os.fspath(path)
    headers = {}
    try:
        with zipfile.ZipFile(name) as archive:
            for member in archive.infolist():
                where = f"{name}[{member.filename}]"
                if not member.filename.endswith(".npy"):
                    raise FormatError(f"{where}: not a .npy member; a .npz holds .npy arrays")
                with archive.open(member) as stream:
                    shape, dtype, _ = read_npy_header(stream, where, member.file_size)
                headers[member.filename[:-4]] = (shape, dtype)
    except zipfile.BadZipFile as error:
        raise FormatError(f"{name}: not a readable .npz archive (truncated or corrupt: "
                          f"{error})") from None
    except FileNotFoundError as error:
        raise LibraryIOError(f"cannot read {name}: {error.strerror}") from error
    except IsADirectoryError:
        raise LibraryIOError(f"{name} is a directory, not a file") from None
    except OSError as error:
        raise LibraryIOError(f"cannot read {name}: {error.strerror or error}") from None
    return headers


def load_npz(path, *, max_bytes, what, names=None):
    """{name: array} of a .npz archive after :func:`npz_headers`; only ``names`` if given.

    ``max_bytes`` bounds the arrays loaded, together.

    >>> import numpy as np, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.npz")
    >>> np.savez(path, table=np.arange(4).reshape(2, 2))
    >>> load_npz(path, max_bytes=1 << 20, what="a table")["table"].tolist()
    [[0, 1], [2, 3]]
    """
    name = os.fspath(path)
    headers = npz_headers(name)
    wanted = list(headers) if names is None else list(names)
    total = sum(math.prod(headers[k][0]) * headers[k][1].itemsize for k in wanted if k in headers)
    if total > max_bytes:
        raise FormatError(f"{name}: its arrays hold {total} bytes, more than {what} can "
                          f"({max_bytes} bytes at most)")
    arrays = {}
    try:
        with zipfile.ZipFile(name) as archive:
            for key in wanted:
                if key not in headers:
                    continue
                where = f"{name}[{key}.npy]"
                with archive.open(key + ".npy") as stream:
                    member = archive.getinfo(key + ".npy")
                    shape, dtype, _ = read_npy_header(stream, where, member.file_size)
                    arrays[key] = _read_data(stream, where, shape, dtype)
    except (zipfile.BadZipFile, EOFError) as error:  # e.g. a CRC mismatch at the end
        raise FormatError(f"{name}: not a readable .npz archive (truncated or corrupt: "
                          f"{error})") from None
    except OSError as error:
        raise LibraryIOError(f"cannot read {name}: {error.strerror or error}") from None
    return arrays
