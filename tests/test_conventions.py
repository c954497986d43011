"""A table read in the wrong signedness or row order is recognised by its distance from exact."""

import pytest

import approxmul_cffi as am
from approxmul_cffi import conventions
from approxmul_cffi.formats import read_table

UNSIGNED = ["exact", "drum:k=3", "drum:k=4", "mitchell", "truncated:cut=6", "roba", "bam:hbl=2,vbl=6",
            "ilm:iterations=1", "dsm:m=4"]
SIGNED = ["exact:signed=1", "drum:k=3,signed=1", "drum:k=4,signed=1", "mitchell:signed=1",
          "truncated:cut=6,signed=1", "roba:signed=1", "ilm:iterations=1,signed=1"]


def saved(tmp_path, spec, order, extension):
    m = am.multiplier(spec)
    path = tmp_path / f"t{extension}"
    m.save(path, order=order)
    return path


def assessed(path):
    return conventions.assess(lambda s, o: read_table(path, signed=s, order=o))


@pytest.mark.parametrize("spec", UNSIGNED + SIGNED)
@pytest.mark.parametrize("extension", [".bin", ".txt"])
def test_the_written_convention_is_never_flagged_and_wrong_ones_are(tmp_path, spec, extension):
    signed = am.multiplier(spec).signed
    for order in (["raw", "offset"] if signed else ["raw"]):
        path = saved(tmp_path, spec, order, extension)
        results = assessed(path)
        assert conventions.mismatch(results, signed, order) is None, (order, results)
        for wrong_signed, wrong_order, _ in results:
            if not conventions.same((wrong_signed, wrong_order), (signed, order)):
                found = conventions.mismatch(results, wrong_signed, wrong_order)
                assert found is not None, (order, wrong_signed, wrong_order, results)
                assert conventions.same(found[1][:2], (signed, order))


def test_warning_text_names_the_file_and_the_fitting_convention(tmp_path):
    path = saved(tmp_path, "exact:signed=1", "raw", ".bin")
    results = assessed(path)
    declared, best = conventions.mismatch(results, False, "raw")
    text = conventions.warning_text(path, declared, False, "raw", best)
    assert str(path) in text and "signed=True, order='raw' it is 0 %" in text
    assert "49.6 %" in text


def test_loaders_warn_about_a_wrong_convention(tmp_path):
    import warnings

    signed_bin = saved(tmp_path, "exact:signed=1", "raw", ".bin")
    offset_txt = tmp_path / "offset.txt"
    am.multiplier("drum:k=4,signed=1").save(offset_txt, order="offset")
    unsigned_bin = tmp_path / "unsigned.bin"
    am.multiplier("mitchell").save(unsigned_bin)
    cases = [
        (lambda: am.multiplier(str(signed_bin)), "signed=True, order='raw'"),      # bare path
        (lambda: am.load_multiplier(signed_bin), "signed=True, order='raw'"),
        (lambda: am.load_multiplier(unsigned_bin, signed=True), "as signed=False it is"),
        (lambda: am.load_multiplier(offset_txt, signed=True), "order='offset' it is"),
        (lambda: am.multiplier(f"file:{offset_txt}?signed=1"), "order='offset' it is"),
    ]
    for load, words in cases:
        with pytest.warns(conventions.TableConventionWarning, match=words):
            load()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the right conventions load silently
        am.load_multiplier(signed_bin, signed=True)
        am.load_multiplier(offset_txt, signed=True, order="offset")
        am.load_multiplier(unsigned_bin)
