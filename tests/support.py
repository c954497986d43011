"""Helpers shared by the test modules (imported by name: ``from support import ...``)."""

import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run_python(code, env=None, timeout=120):
    """Run Python code in a fresh interpreter with this one's import setup."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    # run outside the source tree, so the package imported is the one under test
    # (installed, or the one PYTHONPATH names), never ./approxmul_cffi by accident
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=tempfile.gettempdir())


# the library's feature names -> the kernel's names in /proc/cpuinfo
CPU_FLAGS = {"avx2": ("avx2", "fma"), "avx512f": ("avx512f",), "avx512bw": ("avx512bw",),
             "avx512vl": ("avx512vl",), "avx512dq": ("avx512dq",),
             "avx512vnni": ("avx512_vnni",), "avx512vbmi": ("avx512vbmi",)}


def cpu_features():
    """The features approxmul looks for that this CPU has, read from the kernel
    (independently of the library's own detection)."""
    with open("/proc/cpuinfo") as info:
        flags = next(line for line in info if line.startswith("flags")).split(":")[1].split()
    return [name for name, needed in CPU_FLAGS.items() if all(f in flags for f in needed)]


def supported_isas():
    features = cpu_features()
    isas = ["generic"]
    if "avx2" in features:
        isas.append("avx2")
    if all(f in features for f in CPU_FLAGS):
        isas.append("avx512")
    return isas
