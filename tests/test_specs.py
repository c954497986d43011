"""Spec strings: parsing in C, canonical forms that rebuild the multiplier,
the Python dispatcher, and errors that name the valid choices."""

import pickle

import numpy as np
import pytest

import approxmul_cffi as am
from approxmul_cffi.errors import InvalidArgumentError


@pytest.mark.parametrize("spec,canonical", [
    ("exact", "exact:bits=8,signed=0"),
    ("exact:bits=8,signed=1", "exact:bits=8,signed=1"),
    ("drum:k=4", "drum:bits=8,signed=0,k=4"),
    ("drum:bits=3", "drum:bits=3,signed=0,k=3"),          # k=4 capped at bits
    (" drum : k = 5 , signed=true ", "drum:bits=8,signed=1,k=5"),
    ("truncated:bits=8,cut=6", "truncated:bits=8,signed=0,cut=6,correct=0"),
    ("truncated:cut=6,correct=1", "truncated:bits=8,signed=0,cut=6,correct=1"),
    ("truncated:bits=6", "truncated:bits=6,signed=0,cut=6,correct=0"),  # cut defaults to bits
    ("bam:hbl=2,vbl=7", "bam:bits=8,signed=0,hbl=2,vbl=7"),
    ("mitchell", "mitchell:bits=8,signed=0"), ("mitchell:", "mitchell:bits=8,signed=0"),
    ("ilm:iterations=1", "ilm:bits=8,signed=0,iterations=1"),
    ("roba:signed=1", "roba:bits=8,signed=1"), ("dsm:m=3,bits=16", "dsm:bits=16,signed=0,m=3"),
])
def test_canonical_specs(spec, canonical):
    m = am.multiplier(spec)
    assert m.spec == canonical
    again = am.multiplier(canonical)
    assert again.spec == canonical
    if m.bits <= 8:
        assert np.array_equal(again.table(), m.table())


def test_exact_constructor_has_a_spec_and_everything_pickles_as_its_spec():
    assert am.Multiplier.exact(bits=12, signed=True).spec == "exact:bits=12,signed=1"
    m = am.multiplier("drum:bits=12,k=5,signed=1")
    back = pickle.loads(pickle.dumps(m))
    assert back.spec == m.spec and back.product(-1000, 777) == m.product(-1000, 777)
    assert am.Multiplier.from_table([[0, 0], [0, 1]]).spec is None


@pytest.mark.parametrize("spec,words", [
    ("drmu:k=4", ["unknown multiplier family 'drmu'", "exact, truncated, bam, drum, dsm, mitchell, ilm, roba",
                  "file:PATH", "c:LIBRARY"]),
    ("drum:q=1", ["unknown parameter 'q'", "bits=8 (2..16), signed=0 (0..1), k=4 (2..bits)"]),
    ("drum:k=9", ["k=9 is outside 2..8"]),
    ("drum:bits=17", ["bits=17 is outside 2..16"]),
    ("exact:bits=0", ["bits=0 is outside 1..16"]),
    ("truncated:cut=16", ["cut=16 is outside 0..15"]),
    ("truncated:signed=2", ["signed=2 is outside 0..1"]),
    ("bam:hbl=8", ["hbl=8 is outside 0..7", "hbl=0 (0..bits-1)"]),
    ("drum:k", ["needs a value"]), ("drum:k=four", ["k=four is not an integer"]),
    ("drum:k=3,k=4", ["given twice"]), ("drum:k=3,,bits=8", ["empty parameter"]),
    ("", ["unknown multiplier family ''"]),
    ("drum\0:k=9", ["NUL character"]),
])
def test_spec_errors(spec, words):
    with pytest.raises(InvalidArgumentError) as info:
        am.multiplier(spec)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_dispatch_to_files(tmp_path):
    m = am.multiplier("mitchell:signed=1")
    m.save(tmp_path / "m.txt", order="offset")
    loaded = am.multiplier(f"file:{tmp_path / 'm.txt'}?signed=1&order=offset")
    assert np.array_equal(loaded.table(), m.table())
    assert loaded.spec.startswith("file:") and "order=offset" in loaded.spec
    m2 = am.multiplier("drum:k=4")
    m2.save(tmp_path / "d.bin")
    assert np.array_equal(am.multiplier(str(tmp_path / "d.bin")).table(), m2.table())
    assert np.array_equal(am.multiplier(tmp_path / "d.bin").table(), m2.table())  # PathLike
    with pytest.raises(InvalidArgumentError, match="option 'sign=1'"):
        am.multiplier(f"file:{tmp_path / 'm.txt'}?sign=1")
    with pytest.raises(InvalidArgumentError, match="signed='maybe'"):
        am.multiplier(f"file:{tmp_path / 'm.txt'}?signed=maybe")
    with pytest.raises(InvalidArgumentError, match="expected a string"):
        am.multiplier(42)
    assert am.multiplier(m) is m
