"""``approxmul info``, ``python -m approxmul_cffi`` and ``Multiplier.name``."""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import approxmul_cffi as am
from approxmul_cffi._library import ffi, lib
from support import supported_isas


def run(*args):
    # python -m approxmul_cffi: what `approxmul` runs, without needing pip install
    return subprocess.run([sys.executable, "-m", "approxmul_cffi", *args], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir(),
                          env=dict(os.environ, OMP_NUM_THREADS="3"))


def test_info_prints_the_build_facts():
    out = run("info")
    assert out.returncode == 0, out.stderr
    facts = dict(line.split(None, 1) for line in out.stdout.splitlines())
    assert facts["version"] == ffi.string(lib.approxmul_version_string()).decode()
    assert facts["abi"] == str(lib.APPROXMUL_ABI_VERSION)
    assert facts["isa"] == supported_isas()[-1]
    assert facts["library"] == am.library_path()
    assert facts["threads"] == ("3" if facts["openmp"] == "yes" else "1")  # OMP_NUM_THREADS
    assert set(facts) >= {"kernel.exact-gemm", "kernel.factorized-gemm", "kernel.table",
                          "kernel.function", "cpu_features"}
    as_json = run("info", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == facts


def test_module_entry_point_is_the_command_line():
    out = run("--help")
    assert out.returncode == 0
    for command in ("info", "evaluate", "metrics", "show"):
        assert f"    {command} " in out.stdout
    out = run("metrics", "--csv", "exact:bits=4")
    assert out.returncode == 0
    assert out.stdout.splitlines()[1].startswith('"exact:bits=4,signed=0",4,')
    out = run("metrics", "nosuchfamily")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_multiplier_names_say_what_built_them():
    assert am.Multiplier.exact(8).name == "exact"
    assert am.Multiplier.from_table(np.zeros((4, 4), np.int32)).name == "table"
    assert am.multiplier("drum:k=4").name == "drum"
    assert am.multiplier("truncated:cut=3,bits=12").name == "truncated"
    assert am.Multiplier.from_callable(lambda a, b: a * b, bits=4).name == "callback"


def test_a_reader_that_goes_away_is_not_an_error():
    # approxmul info | head -1: the pipe closes before the output is written
    proc = subprocess.Popen([sys.executable, "-m", "approxmul_cffi", "metrics", "--csv", "exact",
                             "drum:k=4", "drum:k=3", "truncated:bits=8,cut=4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tempfile.gettempdir())
    proc.stdout.close()  # before anything is written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert "Broken pipe" not in stderr and "Traceback" not in stderr, stderr
