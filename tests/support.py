"""Helpers shared by the test modules (imported by name: ``from support import ...``)."""

import csv
import os
import pathlib
import shutil
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


# the approxmul command, as ``python -c MAIN ARGS...`` (the console script exists only
# after pip install)
MAIN = "import sys; from approxmul_cffi.cli import main; sys.exit(main())"


def approxmul(*args, cwd, timeout=300, **kw):
    """Run the approxmul command line with ARGS in a fresh interpreter in cwd."""
    return subprocess.run([sys.executable, "-c", MAIN, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, **kw)


def assert_user_error(proc, *words):
    """`approxmul sweep` exited 2 with one error line last (no traceback) naming every word."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("approxmul sweep: error:"), proc.stderr
    for word in words:
        assert word in last, last


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_costs(path, names, powers):
    """A cost CSV for --costs: a power column with powers[name] for each of the names."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["multiplier", "power"])
        for name in names:
            w.writerow([name, powers[name]])


def package_copy(root, with_library=False):
    """A copy of the package under test in root/approxmul_cffi, without the library inside
    (a source tree) or with it (as a wheel installs it)."""
    import approxmul_cffi

    package = root / "approxmul_cffi"
    shutil.copytree(pathlib.Path(approxmul_cffi.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.dylib", "*.dll"))
    if with_library:
        shutil.copy(approxmul_cffi.library_path(), package / "libapproxmul.so")
    return package


# the library's feature names -> the kernel's names in /proc/cpuinfo
CPU_FLAGS = {"avx2": ("avx2", "fma"), "avx512f": ("avx512f",), "avx512bw": ("avx512bw",),
             "avx512vl": ("avx512vl",), "avx512dq": ("avx512dq",),
             "avx512vnni": ("avx512_vnni",), "avx512vbmi": ("avx512vbmi",),
             "amx-int8": ("amx_tile", "amx_int8")}
AVX512_FEATURES = ("avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni",
                   "avx512vbmi")


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
    if all(f in features for f in AVX512_FEATURES):
        isas.append("avx512")
        if "amx-int8" in features:  # Linux grants the tile state to a process without a small altstack
            isas.append("avx512amx")
    return isas
