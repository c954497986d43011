"""Table files: every format x order x signedness round-trips exactly; the
layouts match the other tools' conventions; bad files give clear errors."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import approxmul_cffi as am
from approxmul_cffi.errors import FormatError, InvalidArgumentError, LibraryIOError

EXT = {"binary": ".bin", "c": ".h", "text": ".txt", "npy": ".npy", "npz": ".npz"}
ORDERS = {False: ["raw"], True: ["raw", "twos", "offset"]}


def multipliers(signed):
    specs = ["drum:k=3,", "mitchell:", "truncated:cut=9,correct=1,"] if signed else [
        "drum:k=4", "truncated:cut=6,correct=1", "bam:hbl=2,vbl=7"]
    return [am.multiplier(x + "signed=1" if signed else x) for x in specs] + [
        am.multiplier(f"ilm:bits=4,signed={int(signed)}")]


@pytest.mark.parametrize("format", list(EXT))
@pytest.mark.parametrize("signed", [False, True])
def test_round_trips(tmp_path, format, signed):
    for m in multipliers(signed):
        for order in ORDERS[signed]:
            path = tmp_path / f"t{EXT[format]}"
            m.save(path, order=order)
            back = am.load_multiplier(path, signed=signed, order=order)
            assert back.bits == m.bits and back.signed == signed
            assert np.array_equal(back.table(), m.table()), (m.spec, order)
            # explicit format, other extension: same result
            other = tmp_path / "table.data"
            m.save(other, format=format, order=order)
            assert np.array_equal(am.load_multiplier(other, signed=signed, order=order,
                                                     format=format).table(), m.table())
            # and the spec of a loaded table rebuilds it
            assert np.array_equal(am.multiplier(back.spec).table(), m.table())


def test_csv_round_trip(tmp_path):
    m = am.multiplier("roba:signed=1")
    m.save(tmp_path / "t.csv", order="offset")
    assert ", " in (tmp_path / "t.csv").read_text().splitlines()[1]
    assert np.array_equal(am.load_multiplier(tmp_path / "t.csv", signed=True, order="offset").table(),
                          m.table())


def test_layouts_match_the_tools(tmp_path):
    exact_u = am.Multiplier.exact(8)
    exact_s = am.Multiplier.exact(8, signed=True)
    # TFApprox: 65536 little-endian uint16, index a*256 + b
    exact_u.save(tmp_path / "u.bin")
    data = (tmp_path / "u.bin").read_bytes()
    assert len(data) == 131072
    assert int.from_bytes(data[2 * (200 * 256 + 57):][:2], "little") == 11400
    # AdaPT: int16_t lut[256][256], row 1 reads 0..127, -128..-1
    exact_s.save(tmp_path / "s.h", order="twos")
    text = (tmp_path / "s.h").read_text()
    assert "const int16_t lut[256][256] = {" in text
    row1 = text.splitlines()[5].strip(" {},").split(", ")
    assert row1[:2] == ["0", "1"] and row1[127:130] == ["127", "-128", "-127"]
    # ApproxTorch: text, row r is A = r - 128, first entry (-128)^2
    exact_s.save(tmp_path / "s.txt", order="offset")
    first = [line for line in (tmp_path / "s.txt").read_text().splitlines() if not line.startswith("#")][0]
    assert first.split()[:2] == ["16384", "16256"]


def test_reads_foreign_c_source(tmp_path):
    # hand-written in another tool's style: comments, static, hex, int32_t, 2-bit table
    path = tmp_path / "lut.h"
    path.write_text("// generated elsewhere\n#include <stdint.h>\n/* block\n comment */\n"
                    "static const int32_t my_lut [4][4] = {\n{0,0,0,0},{0,1,2,3},\n"
                    "{0,2,4,0x6},{0,3,6,8}};\n")
    m = am.load_multiplier(path, signed=False)
    assert m.bits == 2 and m.product(3, 3) == 8 and m.product(2, 3) == 6


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@pytest.mark.parametrize("name,data,signed,words", [
    ("short.bin", bytes(131071), False, ["131071 bytes", "truncated"]),
    ("short2.bin", bytes(131070), False, ["65535 entries", "truncated"]),
    ("text.bin", "0 0\n0 1\n", False, ["all text"]),
    ("bin.h", bytes(range(256)) * 4, False, ["not text"]),
    ("noarray.h", "int x;\n", False, ["no array initializer"]),
    ("cut.h", "int16_t lut[2][2] = {{0, 0}, {0,", False, ["not closed", "truncated"]),
    ("count.h", "int16_t lut[2][2] = {{0, 0}, {0, 1, 2}};", False, ["declared with 4", "5 values"]),
    ("type.h", "int16_t lut[2][2] = {{0, 0}, {0, 70000}};", False, ["int16_t"]),
    ("float.h", "float lut[2][2] = {{0, 0}, {0, 1}};", False, ["element type"]),
    ("ragged.txt", "0 0\n0 1 2\n", False, ["line 2 has 3 values"]),
    ("word.txt", "0 0\n0 x\n", False, ["line 2", "not a decimal integer"]),
    ("notsquare.txt", "0 0 0\n0 1 2\n", False, ["not a square"]),
    # the message quotes the bad literal itself and says what is wrong with it
    ("decimal.txt", "0 0\n0 1.5 7\n", False, ["line 2, field 2: '1.5' is not an integer"]),
    ("huge.txt", "0 0\n0 99999999999999999999 7\n", False,
     ["line 2, field 2: '99999999999999999999' is too large"]),
    ("decimal.h", "int16_t lut[2][2] = {{0, 0}, {0, 1.5}};", False,
     ["line 1: '1.5' is not an integer"]),
    ("huge.h", "int16_t lut[2][2] = {{0, 0},\n{0, 99999999999999999999}};", False,
     ["line 2: '99999999999999999999' is too large"]),
    ("nocomma.h", "int16_t lut[2][2] = {{0, 0}, {0 1}};", False, ["'1' follows a value"]),
    ("c.txt", "int16_t lut[2][2] = {{0,0},{0,1}};", False, ["not a decimal integer"]),
    ("range.txt", "0 0\n0 4\n", False, ["does not fit the 2-bit unsigned product range 0..3"]),
    ("negative.txt", "0 -1\n0 1\n", False, ["product range", "a signed table?", "--signed"]),
    ("signedrange.txt", "0 0\n0 2\n", True, ["-2..1"]),
])
def test_bad_files(tmp_path, name, data, signed, words):
    path = write(tmp_path, name, data)
    with pytest.raises(FormatError) as info:
        am.load_multiplier(path, signed=signed)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert name in str(info.value)  # names the file


def test_text_layouts_and_byte_order_mark(tmp_path):
    # a UTF-8 BOM (Windows editors), one value per line (the binary layout), one line
    m = am.multiplier("drum:k=3,signed=1")
    table = np.asarray(m.table()).reshape(256, 256)
    offset = np.roll(np.roll(table, 128, axis=0), 128, axis=1)  # row i: value i - 128
    rows = "\n".join(" ".join(map(str, row)) for row in offset) + "\n"
    column = "\n".join(map(str, offset.ravel())) + "\n"
    line = ",".join(map(str, offset.ravel())) + "\n"
    for name, text in [("bom.txt", "\ufeff" + rows), ("column.txt", column),
                       ("bomcolumn.csv", "\ufeff" + column), ("line.txt", line)]:
        path = write(tmp_path, name, text.encode("utf-8"))
        loaded = am.load_multiplier(path, signed=True, order="offset")
        assert np.array_equal(np.asarray(loaded.table()), np.asarray(m.table())), name
    c_source = "\ufeffint32_t lut[256][256] = {" + ",".join(map(str, table.ravel())) + "};\n"
    loaded = am.load_multiplier(write(tmp_path, "bom.h", c_source.encode()), signed=True)
    assert np.array_equal(np.asarray(loaded.table()), np.asarray(m.table()))
    # a BOM is text only: a binary table starting with those bytes keeps them as entries
    raw = bytes([0xEF, 0xBB, 0xBF, 0x00]) + bytes(4)  # 4 entries, the first 0xBBEF
    with pytest.raises(FormatError, match="entry \\[0\\]\\[0\\] = 48111"):
        parse(raw, "binary")


def test_bad_numpy_files(tmp_path):
    np.save(tmp_path / "float.npy", np.zeros((4, 4)))
    np.save(tmp_path / "shape.npy", np.zeros((4, 5), np.int32))
    np.save(tmp_path / "big.npy", np.full((4, 4), 99, np.int32))
    np.savez(tmp_path / "two.npz", x=np.zeros((4, 4), np.int32), y=np.zeros((4, 4), np.int32))
    write(tmp_path, "junk.npy", b"not numpy")
    for name, words in [("float.npy", "dtype float64"), ("shape.npy", "shape (4, 5)"),
                        ("big.npy", "entry [0][0] = 99"), ("two.npz", "'table'"), ("junk.npy", "not a readable")]:
        with pytest.raises(FormatError, match=re.escape(words)):
            am.load_multiplier(tmp_path / name, signed=False)


def test_bad_arguments(tmp_path):
    m = am.multiplier("mitchell")
    with pytest.raises(LibraryIOError, match="nothere.bin"):
        am.load_multiplier(tmp_path / "nothere.bin", signed=False)
    with pytest.raises(InvalidArgumentError, match="extension '.xyz'"):
        m.save(tmp_path / "t.xyz")
    with pytest.raises(InvalidArgumentError, match="format: 'png'"):
        m.save(tmp_path / "t.bin", format="png")
    with pytest.raises(InvalidArgumentError, match="unsigned tables are in raw order"):
        m.save(tmp_path / "t.bin", order="offset")
    with pytest.raises(InvalidArgumentError, match="order: 'rows'"):
        am.load_multiplier(tmp_path / "t.bin", signed=True, order="rows")
    m.save(tmp_path / "t.bin")
    with pytest.raises(FormatError, match="a 4-bit table has"):
        am.load_multiplier(tmp_path / "t.bin", signed=False, bits=4)
    # a product outside the 2n-bit range cannot be stored in a table file
    with pytest.raises(InvalidArgumentError, match="36864"):
        am.multiplier("drum:k=2,signed=1").save(tmp_path / "d.txt")
    with pytest.raises(am.UnsupportedError):
        am.multiplier("drum:bits=13").save(tmp_path / "d.txt")


def parse(data, format, signed=False, order="raw"):
    from approxmul_cffi._library import check, ffi, lib

    out = ffi.new("int32_t[]", 1 << 16)
    bits = ffi.new("int *")
    check(lib.approxmul_table_parse(ffi.from_buffer(data), len(data),
                                    getattr(lib, {"binary": "APPROXMUL_TABLE_BINARY_U16LE",
                                                  "c": "APPROXMUL_TABLE_C_SOURCE",
                                                  "text": "APPROXMUL_TABLE_TEXT"}[format]),
                                    0, signed, getattr(lib, f"APPROXMUL_ORDER_{order.upper()}"),
                                    out, 1 << 16, bits))
    return bits[0]


VALID = {
    "binary": bytes([0, 0, 0, 0, 0, 0, 1, 0]),
    "c": b"const int16_t lut[2][2] = {{0, 0}, {0, 1}};\n",
    "text": b"0 0\n0 1\n",
}



@settings(max_examples=300, deadline=None)
@given(format=st.sampled_from(sorted(VALID)), data=st.data())
def test_parsers_survive_mutations(format, data):
    # any bytes, or a valid file with bytes flipped, cut or inserted: a result or FormatError
    base = bytearray(VALID[format])
    choice = data.draw(st.integers(0, 3))
    if choice == 0:
        blob = data.draw(st.binary(max_size=200))
    else:
        position = data.draw(st.integers(0, len(base)))
        if choice == 1 and position < len(base):
            base[position] = data.draw(st.integers(0, 255))
        elif choice == 2:
            base = base[:position]
        else:
            base[position:position] = data.draw(st.binary(min_size=1, max_size=8))
        blob = bytes(base)
    try:
        assert 1 <= parse(blob, format) <= 8
    except FormatError:
        pass
