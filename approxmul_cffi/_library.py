"""Find, open and check the approxmul shared library (cffi ABI mode).

Lookup order: the APPROXMUL_LIBRARY environment variable, then the copy
installed inside this package. The first that opens wins; if none does, one
error lists every path tried and why it failed. Nothing is compiled here.
"""

import importlib.resources
import os
import sys
import warnings

from cffi import FFI

from ._cdef import ABI_VERSION, CDEF
from ._interrupt import InterruptibleLibrary
from .errors import STATUS_CLASSES, InternalError, LibraryNotFoundError

ffi = FFI()
ffi.cdef(CDEF)

if sys.platform == "win32":
    LIBRARY_FILE = "approxmul.dll"
elif sys.platform == "darwin":
    LIBRARY_FILE = "libapproxmul.dylib"
else:
    LIBRARY_FILE = "libapproxmul.so"


def _candidates():
    env = os.environ.get("APPROXMUL_LIBRARY")
    if env:
        yield env, "APPROXMUL_LIBRARY"
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_FILE)
    yield here, "package directory"
    # editable installs serve the built library through importlib.resources
    try:
        resource = importlib.resources.files(__package__) / LIBRARY_FILE
        if resource.is_file() and os.fspath(resource) != here:
            yield os.fspath(resource), "package resources"
    except (TypeError, ValueError, OSError):
        pass


def _open():
    tried = []
    for path, origin in _candidates():
        if not os.path.isfile(path):
            tried.append(f"  {path} ({origin}): no such file")
            continue
        try:
            library = ffi.dlopen(path)
        except OSError as error:
            tried.append(f"  {path} ({origin}): {error}")
            continue
        if tried:  # an explicit APPROXMUL_LIBRARY failed: say so rather than hide it
            warnings.warn("approxmul: using " + path + " after failing to open:\n" +
                          "\n".join(tried), RuntimeWarning, stacklevel=3)
        return library, path
    raise LibraryNotFoundError(
        "cannot open the approxmul library; tried:\n" + "\n".join(tried) +
        "\nInstall the package with 'pip install .' or point APPROXMUL_LIBRARY at a built "
        + LIBRARY_FILE
    )


raw_lib, LIBRARY_PATH = _open()

if raw_lib.approxmul_abi_version() != ABI_VERSION:
    raise LibraryNotFoundError(
        f"{LIBRARY_PATH} has ABI version {raw_lib.approxmul_abi_version()}, "
        f"but this approxmul_cffi was written for ABI version {ABI_VERSION}"
    )


# approxmul_status value -> exception class, the values read from the library
STATUS_ERRORS = {getattr(raw_lib, name): cls for name, cls in STATUS_CLASSES.items()}


def check(status):
    """Raise the exception matching a non-zero approxmul_status, with the C message."""
    if status != 0:
        # raised straight from the call: a local holding it would make a
        # frame <-> traceback cycle that keeps the caller's buffers alive
        raise error_for(status)


def error_for(status, message=None):
    """The exception for a non-zero status, carrying this thread's C message (or ``message``)."""
    if message is None:
        message = ffi.string(lib.approxmul_last_error()).decode("utf-8", "replace")
    if not message:
        message = ffi.string(raw_lib.approxmul_status_string(status)).decode()
    error = STATUS_ERRORS.get(status, InternalError)(message)
    error.status = status
    return error


# the library as the modules call it: long calls are interruptible (_interrupt.py)
lib = InterruptibleLibrary(raw_lib, ffi, CDEF)


def c_string(pointer):
    return ffi.string(pointer).decode("utf-8", "replace")
