"""Attack: table and model files that declare (or are) far more than any real one.

Each case runs in a child interpreter limited to 4 GiB of address space and
60 s: the library must refuse the file with one clear error, quickly, before
allocating what the file claims.
"""

import json
import os
import sys
import tempfile
import zipfile

from common import approxmul, expect_usage_error, python

LIMITS = "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
folder = tempfile.mkdtemp(prefix="approxmul-attack-")


def npy_header(shape, dtype="<f4"):
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


def refused(code, *words):
    """Runs code that must raise an approxmul error containing every word."""
    result = python(LIMITS + "import approxmul_cffi as am, sys\ntry:\n" +
                    "".join(f"    {line}\n" for line in code.strip().splitlines()) +
                    "except am.ApproxmulError as error:\n    print(error)\n    sys.exit(0)\n"
                    "sys.exit('accepted')\n", timeout=60)
    text = result.stdout.strip()
    if result.returncode != 0 or not all(word in text for word in words):
        sys.exit(f"FAIL: {code.strip()}: exit {result.returncode}\n{text}\n"
                 f"{result.stderr[-2000:]}")
    print("ok:", text)


# a device with no end: read at most as much as the largest table
refused("am.multiplier('file:/dev/zero?format=binary')", "/dev/zero", "larger than")
refused("am.multiplier('file:/dev/zero?format=text')", "/dev/zero", "larger than")
refused("am.multiplier('file:/dev/urandom?format=c')", "/dev/urandom", "larger than")

# a table .npy declaring 2^31 x 2^31 entries
with open(os.path.join(folder, "huge.npy"), "wb") as f:
    f.write(npy_header((1 << 31, 1 << 31), "<i4") + bytes(64))
refused(f"am.multiplier({os.path.join(folder, 'huge.npy')!r})", "huge.npy")

# a model whose weights file declares a 32000 x 32000 weight
model = {"format": "approxmul-model", "version": 1, "weights": "big.npz",
         "input": {"name": "input", "shape": [32000]},
         "nodes": [{"name": "fc", "op": "Linear", "inputs": ["input"],
                    "config": {"in_features": 32000, "out_features": 32000, "bias": False}}]}
bundled = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "approxmul_cffi", "models", "digits_lenet.json")
with open(bundled) as f:
    real = json.load(f)
model["format"], model["version"] = real["format"], real["version"]
with open(os.path.join(folder, "big.json"), "w") as f:
    json.dump(model, f)
with zipfile.ZipFile(os.path.join(folder, "big.npz"), "w", zipfile.ZIP_DEFLATED) as archive:
    archive.writestr("fc.weight.npy", npy_header((32000, 32000)) + bytes(1 << 20))
refused(f"from approxmul_cffi import nn\nnn.Model.load({os.path.join(folder, 'big.json')!r})",
        "big.npz", "32000 x 32000")

# a model declaring a Linear of 10^6 x 10^6 (7 TiB of float64 zeros)
model["nodes"][0]["config"] = {"in_features": 10**6, "out_features": 10**6, "bias": False}
model["input"]["shape"] = [10**6]
model["weights"] = "small.npz"
with open(os.path.join(folder, "wide.json"), "w") as f:
    json.dump(model, f)
with zipfile.ZipFile(os.path.join(folder, "small.npz"), "w") as archive:
    archive.writestr("fc.weight.npy", npy_header((2, 2)) + bytes(16))
refused(f"from approxmul_cffi import nn\nnn.Model.load({os.path.join(folder, 'wide.json')!r})",
        "'fc'")

# the same through the command line: one line, exit 2
expect_usage_error(approxmul("metrics", "file:/dev/zero?format=binary", timeout=60),
                   "/dev/zero")
expect_usage_error(approxmul("evaluate", "--model", os.path.join(folder, "big.json"),
                             "--limit", "5", "--no-progress", timeout=60), "big.npz")
