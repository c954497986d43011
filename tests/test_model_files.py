"""Model files that declare more than they hold, or hold mistakes: one line naming file and layer.

Real model files written by nn.Model.save, then edited as a user or an
attacker would; the address space is capped so that a regression which
allocates what the file declares fails instead of swapping.
"""

import json
import os
import resource
import zipfile

import numpy as np
import pytest

from approxmul_cffi import nn
from approxmul_cffi.evaluation import bundled_model


@pytest.fixture
def small_address_space():
    if os.environ.get("APPROXMUL_SANITIZED"):
        # ASan reserves terabytes of address space for its shadow memory: no
        # limit there (the checks under test run all the same)
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 8 << 30 if hard < 0 else min(8 << 30, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def npy_header(shape, dtype="<f4"):
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


def tiny_model(tmp_path, features=(4, 3)):
    model = nn.Model((features[0],), [("fc", nn.Linear(*features))])
    return model.save(tmp_path / "m")


def edit(path, change):
    doc = json.loads(open(path).read())
    change(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def test_a_huge_declared_weight_is_refused_from_its_header(tmp_path, small_address_space):
    path = tiny_model(tmp_path)
    edit(path, lambda d: (d["nodes"][0]["config"].update(in_features=32000, out_features=32000),
                          d["input"].update(shape=[32000])))
    with zipfile.ZipFile(tmp_path / "m.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        # the header of a 4 GB weight with a little data: what a damaged file holds
        archive.writestr("fc.weight.npy", npy_header((32000, 32000)) + bytes(1 << 16))
        archive.writestr("fc.bias.npy", npy_header((32000,)) + bytes(4 * 32000))
    with pytest.raises(nn.ModelError, match=r"m.npz\[fc.weight.npy\]: declares a 32000 x 32000 "
                                            r"float32 array .*truncated or corrupt"):
        nn.Model.load(tmp_path / "m.json")


def test_a_huge_declared_layer_is_refused_before_allocating(tmp_path, small_address_space):
    path = tiny_model(tmp_path)
    edit(path, lambda d: (d["nodes"][0]["config"].update(in_features=10**6, out_features=10**6),
                          d["input"].update(shape=[10**6])))
    with pytest.raises(nn.ModelError, match=r"layer 'fc' \(Linear\): needs weight of shape "
                                            r"\(1000000, 1000000\); weights file .*m.npz holds"):
        nn.Model.load(path)
    edit(path, lambda d: d["nodes"][0]["config"].update(in_features=1e300))
    with pytest.raises(nn.ModelError, match=r"m.json: layer 'fc': bad config \(Linear.*"
                                            r"in_features: expected an integer, got float"):
        nn.Model.load(path)


@pytest.mark.parametrize("change, words", [
    (lambda d: d["nodes"][0]["config"].update(kernel_size="abc"),
     ["m.json: layer 'conv1': bad config (Conv2d", "kernel_size"]),
    (lambda d: d["nodes"][1].update(name="conv1"),
     ["m.json: layer name 'conv1' is used twice (nodes 0 and 1)"]),
    (lambda d: d["nodes"][0]["config"].update(stride=[1, "x"]),
     ["layer 'conv1': bad config (Conv2d"]),
    # sizes are integers: 2.7 channels is a mistake to report, not to truncate to 2
    (lambda d: d["nodes"][0]["config"].update(out_channels=2.7),
     ["layer 'conv1': bad config (Conv2d", "out_channels: expected an integer, got float"]),
    (lambda d: d["nodes"][0]["config"].update(groups=1.0),
     ["layer 'conv1': bad config (Conv2d", "groups: expected an integer, got float"]),
])
def test_config_mistakes_name_file_and_layer(tmp_path, change, words):
    path = bundled_model().save(tmp_path / "m")
    edit(path, change)
    with pytest.raises(nn.ModelError) as caught:
        nn.Model.load(path)
    for word in words:
        assert word in str(caught.value), str(caught.value)


@pytest.mark.parametrize("layer, name, value", [
    ("bn1", "running_var", -0.5),
    ("conv2", "weight", 1e38),
])
def test_out_of_range_parameters_are_blamed_on_their_layer(tmp_path, layer, name, value):
    model = bundled_model()
    params = model.layers[layer].params()[name].copy()
    params.flat[0] = value
    model.layers[layer].set_param(name, params)
    x = np.random.default_rng(0).random((8, 1, 8, 8), dtype=np.float32)
    with pytest.raises(nn.ModelError, match=r"layer '\w+' computes NaN or infinity on finite "
                                            r"calibration data") as caught:
        nn.quantize(model, x)
    assert "calibration data contains" not in str(caught.value)
    with pytest.raises(nn.ModelError, match="calibration data contains NaN"):
        nn.quantize(bundled_model(), np.full((2, 1, 8, 8), np.nan, np.float32))
