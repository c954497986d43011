"""The library at run time: where it was loaded from, its build facts, its threads."""

from ._library import LIBRARY_PATH, c_string, check, lib

__all__ = ["get_num_threads", "info", "library_path", "set_num_threads"]


def library_path():
    """Path of the shared library in use (APPROXMUL_LIBRARY or the packaged copy).

    >>> import os, approxmul_cffi as am
    >>> os.path.isfile(am.library_path())
    True
    """
    return LIBRARY_PATH


def set_num_threads(num_threads):
    """Threads for approxmul's kernels; 0 means one per core. Leaves OpenMP's own setting alone.

    >>> import approxmul_cffi as am
    >>> before = am.get_num_threads(); am.set_num_threads(1); am.get_num_threads()
    1
    >>> am.set_num_threads(before)
    """
    check(lib.approxmul_set_num_threads(num_threads))


def get_num_threads():
    """Threads approxmul's kernels use (see :func:`set_num_threads`).

    >>> import approxmul_cffi as am
    >>> am.get_num_threads() >= 1
    True
    """
    return lib.approxmul_get_num_threads()


def info():
    """Build and CPU dispatch facts as a dict.

    Keys: version, abi, openmp, openmp_runtime (the file of the OpenMP runtime in use), isa (the instruction set the kernels run on,
    or "unavailable" with isa_error when APPROXMUL_ISA forces one the CPU
    lacks), cpu_features, kernel.<plan> (the kernel each plan runs on;
    kernel.byte-gemm: the one 8-bit exact and factorized plans use first),
    library, threads.

    >>> import approxmul_cffi as am
    >>> am.info()["isa"] in ("generic", "avx2", "avx512", "avx512amx", "unavailable")
    True
    """
    text = c_string(lib.approxmul_build_info())
    facts = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    facts["library"] = LIBRARY_PATH
    facts["threads"] = str(get_num_threads())
    return facts
