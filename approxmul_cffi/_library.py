"""Find, open and check the approxmul shared library (cffi ABI mode).

Lookup order: the APPROXMUL_LIBRARY environment variable, then the copy
installed inside this package. The first that opens and is approxmul's wins;
if none does, one error lists every path tried and why it failed (the
approxmul command prints it as one line). Nothing is compiled here.
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
        try:
            library.approxmul_abi_version  # another library that merely opens is no use
        except AttributeError:
            ffi.dlclose(library)
            tried.append(f"  {path} ({origin}): not an approxmul library (it has no "
                         "approxmul_abi_version function)")
            continue
        if tried:  # an explicit APPROXMUL_LIBRARY failed: say so rather than hide it
            warnings.warn("approxmul: using " + path + " after failing to open:\n" +
                          "\n".join(tried), RuntimeWarning, stacklevel=3)
        return library, path
    _fail("cannot open the approxmul library; tried:\n" + "\n".join(tried) +
          "\nInstall the package with 'pip install .' or point APPROXMUL_LIBRARY at a built "
          + LIBRARY_FILE)


def _command_line():
    """Whether this process is the approxmul command starting: its console script, or
    ``python -m approxmul_cffi`` (or ``approxmul_cffi.cli``), whose promise is one line per
    error and no traceback. Their import of this package is where the library is opened."""
    if sys.argv[:1] == ["-m"]:  # python -m, while the module is being found
        argv = getattr(sys, "orig_argv", None)  # Python >= 3.10
        if argv is None and os.path.isfile("/proc/self/cmdline"):  # 3.9 on Linux
            with open("/proc/self/cmdline", "rb") as handle:
                argv = os.fsdecode(handle.read()).split("\0")[:-1]
        if not argv or len(argv) < len(sys.argv):
            return False
        module = argv[-len(sys.argv)]  # what follows -m, then the module's own arguments
        module = module[2:] if module.startswith("-m") else module
        return module in ("approxmul_cffi", "approxmul_cffi.cli")
    # the console script, as pip writes it (named so until its main() runs)
    return bool(sys.argv) and os.path.basename(sys.argv[0]) in (
        "approxmul", "approxmul.exe", "approxmul-script.py", "approxmul-script.pyw")


def _fail(message):
    """Raise LibraryNotFoundError; the approxmul command prints it as one line and exits 2."""
    if _command_line():
        head, *rest = [part.strip() for part in message.splitlines()]
        line = f"{head} {'; '.join(rest)}" if rest else head
        print(f"approxmul: error: {line}", file=sys.stderr)
        raise SystemExit(2)
    raise LibraryNotFoundError(message)


raw_lib, LIBRARY_PATH = _open()

if raw_lib.approxmul_abi_version() != ABI_VERSION:
    _fail(f"{LIBRARY_PATH} has ABI version {raw_lib.approxmul_abi_version()}, "
          f"but this approxmul_cffi was written for ABI version {ABI_VERSION}")


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
