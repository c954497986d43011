"""Attack: vendor C models that crash, exit, abort, loop, or are not functions at all."""

import os
import shutil
import subprocess
import sys
import tempfile

from common import HERE, expect_ctrl_c_stops, expect_success, python

SOURCE = os.path.join(os.path.dirname(HERE), "fixtures", "hostile_models.c")
folder = tempfile.mkdtemp(prefix="approxmul-attack-")
library = os.path.join(folder, "libhostile.so")
subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", "-O1", "-o", library, SOURCE],
               check=True)

code = f"""
import approxmul_cffi as am
library = {library!r}
for symbol, words in [("mul8u_segfault", "SIGSEGV"), ("mul8u_abort", "SIGABRT"),
                      ("mul8u_exit", "exit status 3"), ("mul8u_exit0", "exit status 0")]:
    try:
        am.Multiplier.from_c_function(library, symbol, "u8")
    except am.CallbackError as error:
        assert symbol in str(error) and words in str(error), error
    else:
        raise SystemExit(symbol + " was accepted")
try:
    am.Multiplier.from_c_function(library, "mul8u_endless", "u8", timeout=3)
except am.CallbackError as error:
    assert "mul8u_endless" in str(error) and "3 s" in str(error), error
else:
    raise SystemExit("the endless model returned")
for symbol, signature in [("mul8u_table", "u8"), ("mul16u_data_too", "u16")]:
    for isolate in (True, False):
        try:
            am.Multiplier.from_c_function(library, symbol, signature, isolate=isolate)
        except am.InvalidArgumentError as error:
            assert "data object" in str(error), error
        else:
            raise SystemExit(symbol + " (data) was accepted")
print("survived", am.Multiplier.from_c_function(library, "mul8u_fine", "u8").product(7, 9))
"""
result = python(code, timeout=300)
expect_success(result, "every hostile model became an error")
assert result.stdout.strip().endswith("survived 63"), result.stdout

# Ctrl-C while an endless model is being tabulated (it was ignored before)
expect_ctrl_c_stops([sys.executable, "-c", f"""
import approxmul_cffi as am
try:
    am.Multiplier.from_c_function({library!r}, "mul8u_endless", "u8")
except KeyboardInterrupt:
    raise SystemExit(7)
"""], "tabulating an endless vendor model", 7)
shutil.rmtree(folder)
