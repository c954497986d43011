"""The command line on a minimal install (cffi only, maybe no NumPy), as a user runs it."""

import json
import os
import subprocess
import sys
import tempfile


def approxmul(*args):
    # a fresh interpreter outside the source tree, like the `approxmul` script
    return subprocess.run([sys.executable, "-m", "approxmul_cffi", *args], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir())


def test_info_reports_the_library_and_openmp_runtime():
    result = approxmul("info", "--json")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert os.path.isfile(facts["library"])
    assert facts["openmp_runtime"] == "none" if facts["openmp"] == "no" else \
        os.path.isfile(facts["openmp_runtime"])


def test_evaluate_without_numpy_is_a_usage_error():
    # NumPy made unimportable (None in sys.modules), as on a NumPy-free install
    code = ("import sys; sys.modules['numpy'] = None\n"
            "from approxmul_cffi.cli import main\n"
            "sys.exit(main(['evaluate', '--limit', '10']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=tempfile.gettempdir())
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "approxmul evaluate: error: needs NumPy, which is not installed: "
        "pip install 'approxmul[numpy]'"]
