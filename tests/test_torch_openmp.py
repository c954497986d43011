"""approxmul and PyTorch in one process: correct results, exit status 0.

PyTorch's wheel brings its own libgomp, and approxmul's binary wheel
vendors another under a hashed name (docs/packaging.md). Imported first,
approxmul binds to its own copy and both thread pools run at once; imported
after torch, it binds to the runtime torch made global. Either way the
results must match independent references while torch computes in another
thread, and the process must exit 0 (runtimes tearing down at exit is where
such processes crash). CI runs this in the source install (main job) and in
a virtual environment holding the binary wheel (wheel job).
"""

import pytest

pytest.importorskip("torch")

# Runs in a fresh interpreter; IMPORTS is replaced by the import order.
PROCESS = """
IMPORTS
import os, threading
import numpy as np

torch.set_num_threads(2)
am.set_num_threads(2)
rng = np.random.default_rng(7)
a = rng.integers(0, 256, (96, 300), dtype=np.uint8)
b = rng.integers(0, 256, (300, 80), dtype=np.uint8)
# an approximate multiplier given by its table: products with the low 6 bits cleared
table = (np.arange(256)[:, None] * np.arange(256)[None, :]) & ~0x3F
truncated = am.Multiplier.from_table(table)
expected_truncated = np.array([[int(table[a[i], b[:, j]].sum()) for j in range(80)]
                               for i in range(96)])
errors = []

def torch_work():
    x = torch.randn(64, 128, dtype=torch.float64)
    for _ in range(20):
        y = x @ x.T  # on torch's OpenMP pool
        if not torch.allclose(y, y.T):
            errors.append("torch: x @ x.T is not symmetric")

def approxmul_work():
    for _ in range(20):
        exact = am.matmul(a, b, am.Multiplier.exact(8))
        ta, tb = torch.from_numpy(a.astype(np.int64)), torch.from_numpy(b.astype(np.int64))
        if not np.array_equal(exact, (ta @ tb).numpy()):
            errors.append("approxmul exact matmul differs from torch's int64 matmul")
        if not np.array_equal(am.matmul(a, b, truncated), expected_truncated):
            errors.append("approxmul table matmul differs from the table sums")

threads = [threading.Thread(target=torch_work), threading.Thread(target=approxmul_work)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors

runtime = os.path.realpath(am.info()["openmp_runtime"])
with open("/proc/self/maps") as maps:
    mapped = {os.path.realpath(line.split(None, 5)[5].strip())
              for line in maps if len(line.split(None, 5)) == 6}
assert runtime in mapped, runtime
libs = os.path.realpath(os.path.join(os.path.dirname(os.path.dirname(am.library_path())),
                                     "approxmul.libs"))
torch_lib = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib"))
if os.path.isdir(libs):  # a binary wheel, with its vendored runtime
    # imported first, approxmul binds to its own copy; after torch, to the
    # libgomp torch made global (docs/packaging.md): one runtime either way
    expected = libs if FIRST == "approxmul" else torch_lib
    assert os.path.dirname(runtime) == expected, (runtime, expected)
print("ok", runtime)
"""


@pytest.mark.parametrize("imports", [
    "import torch\nimport approxmul_cffi as am",
    "import approxmul_cffi as am\nimport torch",
], ids=["torch-first", "approxmul-first"])
def test_torch_and_approxmul_share_a_process(python_runner, imports):
    first = "torch" if imports.startswith("import torch") else "approxmul"
    code = PROCESS.replace("IMPORTS", imports).replace("FIRST", repr(first))
    result = python_runner(code, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ok "), result.stdout
