"""Gate-level Verilog netlists as multipliers (approxmul_cffi.verilog).

References: the families' own tables (written netlists read back), the
exact product a*b, and tests/netlist_reference.py, a separate Python
evaluator of the same hand-written netlists that shares no code with the C
reader.
"""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import approxmul_cffi as am
from approxmul_cffi import verilog
from approxmul_cffi.errors import FormatError, InvalidArgumentError, UnsupportedError
from netlist_reference import Netlist as Reference

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "netlists")


def exact_table(bits, signed=False):
    values = np.arange(1 << bits)
    if signed:
        values = np.where(values >= 1 << (bits - 1), values - (1 << bits), values)
    return np.multiply.outer(values, values)


def full_table(m):
    """Every product in raw-pattern order, tables and the 9..12-bit function plan alike."""
    if m.bits <= 8:
        return np.asarray(m.table(), dtype=np.int64)
    return np.asarray(m.error_map()) + exact_table(m.bits, m.signed)


# ---------------------------------------------------------------- round trip

FAMILIES = ["exact", "exact:signed=1", "truncated:cut={n}", "truncated:cut={n},correct=1",
            "truncated:signed=1,cut={h},correct=1", "truncated:signed=1,cut=3",
            "bam:hbl=1,vbl={h}", "bam:signed=1,hbl=2,vbl={n}", "bam:hbl={h}"]


# 12 bits take ~1 s each: every other variant there (all three families, signed and not)
ROUND_TRIPS = [(bits, f) for bits in (4, 8) for f in FAMILIES] + [(12, f) for f in FAMILIES[::2]]


@pytest.mark.parametrize("bits, family", ROUND_TRIPS)
def test_written_netlists_read_back_to_the_family_table(bits, family):
    spec = family.format(n=bits, h=bits // 2).replace(":", f":bits={bits},", 1)
    spec = spec if ":" in family else f"{family}:bits={bits}"
    original = am.multiplier(spec)
    text = original.to_verilog()
    back = am.Multiplier.from_verilog(text, signed=original.signed)
    assert back.bits == bits and back.signed == original.signed
    assert np.array_equal(full_table(back), full_table(original)), spec
    assert back.metadata["spec"] == (original.spec, "")


def test_writers_exist_only_for_circuit_families():
    with pytest.raises(UnsupportedError, match="exact, truncated and bam"):
        am.multiplier("drum:k=4").to_verilog()
    with pytest.raises(UnsupportedError, match="no built-in family"):
        am.Multiplier.from_table([[0, 0], [0, 1]]).to_verilog()


# ---------------------------------------------------------------- hand-written netlists

def fixture(name):
    return os.path.join(FIXTURES, name)


def test_ripple_carry_array_with_vectors_and_metadata():
    path = fixture("array4_ripple.v")
    text = open(path).read()
    reference = Reference(text).table()
    assert np.array_equal(reference, exact_table(4))  # the evaluator agrees with a*b
    m = am.multiplier(path)
    assert np.array_equal(m.table(), reference)
    assert m.spec == f"verilog:{path}?signed=0" and m.name == "array4"
    assert m.metadata == {"AREA": (123.5, "um2"), "DELAY": (0.91, "ns"), "MAE": (0.0, "")}
    again = pickle.loads(pickle.dumps(m))
    assert np.array_equal(again.table(), reference) and again.metadata == m.metadata


def test_primitives_approximate_multiplier():
    path = fixture("mul3_primitives.v")
    reference = Reference(open(path).read()).table()
    assert not np.array_equal(reference, exact_table(3))
    m = am.Multiplier.from_verilog(path)
    assert np.array_equal(m.table(), reference)
    assert m.product(3, 3) == reference[3, 3]
    info = verilog.Netlist(path).info()
    assert info["primitives"] == 18 and info["assigns"] == 6 and info["bits"] == 3
    assert m.metadata["PDK45_AREA"] == (18.3, "um2")


def dadda_netlist(n, drop=0):
    """An n x n Dadda-tree multiplier in gate primitives; partial products in columns < drop removed."""
    lines, cols, counter = [], [[] for _ in range(2 * n)], [0]

    def fresh():
        counter[0] += 1
        return f"w{counter[0]}"

    for j in range(n):
        for i in range(n):
            if i + j >= drop:
                lines.append(f"and (p{i}_{j}, A[{i}], B[{j}]);")
                cols[i + j].append(f"p{i}_{j}")

    def full_adder(x, y, z):
        t, s, g1, g2, c = (fresh() for _ in range(5))
        lines.extend([f"xor ({t}, {x}, {y});", f"xor ({s}, {t}, {z});", f"and ({g1}, {x}, {y});",
                      f"and ({g2}, {t}, {z});", f"or ({c}, {g1}, {g2});"])
        return s, c

    def half_adder(x, y):
        s, c = fresh(), fresh()
        lines.extend([f"xor ({s}, {x}, {y});", f"and ({c}, {x}, {y});"])
        return s, c

    heights = [2]
    while heights[-1] < max(len(c) for c in cols):
        heights.append(heights[-1] * 3 // 2)
    for d in reversed(heights[:-1]):
        for k in range(2 * n):
            while len(cols[k]) > d:
                if len(cols[k]) == d + 1:
                    s, c = half_adder(cols[k].pop(0), cols[k].pop(0))
                else:
                    s, c = full_adder(cols[k].pop(0), cols[k].pop(0), cols[k].pop(0))
                cols[k].append(s)
                if k + 1 < 2 * n:
                    cols[k + 1].append(c)
    carry = None
    for k in range(2 * n):
        bits = cols[k] + ([carry] if carry else [])
        carry = None
        if not bits:
            lines.append(f"buf (O[{k}], 1'b0);")
        elif len(bits) == 1:
            lines.append(f"buf (O[{k}], {bits[0]});")
        else:
            s, carry = half_adder(*bits) if len(bits) == 2 else full_adder(*bits)
            lines.append(f"buf (O[{k}], {s});")
    wires = sorted({w for line in lines for w in line[line.index("(") + 1:-2].split(", ")[:1]
                    if not w.startswith("O[")})
    return (f"module dadda{n}(A, B, O);\n  input [{n - 1}:0] A, B;\n  output [{2 * n - 1}:0] O;\n"
            + "".join(f"  wire {w};\n" for w in wires) + "".join(f"  {x}\n" for x in lines)
            + "endmodule\n")


@pytest.mark.parametrize("drop", [0, 4])
def test_dadda_tree_in_gate_primitives(drop):
    text = dadda_netlist(8, drop)
    reference = Reference(text).table()
    if drop == 0:
        assert np.array_equal(reference, exact_table(8))
    else:
        assert (reference <= exact_table(8)).all() and (reference != exact_table(8)).any()
    m = am.Multiplier.from_verilog(text)
    assert np.array_equal(m.table(), reference)
    info = verilog.Netlist(text).info()
    assert info["gates"] == info["primitives"] - sum(line.strip().startswith("buf")
                                                     for line in text.splitlines())


CELLS = {
    "AND2X1": {"Y": "A & B"},
    "NAND2X1": {"Y": "~(A & B)"},
    "INVX1": {"Y": "~A"},
    "HAX1": {"YS": "A ^ B", "YC": "A & B"},
    "FAX1": {"YS": "A ^ B ^ C", "YC": "(A & B) | (C & (A ^ B))"},
}


def cell_netlist(n):
    """An n x n carry-save array of standard cells (named pins), as a synthesis tool writes it."""
    lines, cols, counter = [], [[] for _ in range(2 * n)], [0]

    def fresh():
        counter[0] += 1
        return f"n{counter[0]}"

    for j in range(n):
        for i in range(n):
            if (i + j) % 3 == 0:  # some partial products as NAND + INV
                x, y = fresh(), fresh()
                lines.append(f"NAND2X1 U{len(lines)} ( .A(A[{i}]), .B(B[{j}]), .Y({x}) );")
                lines.append(f"INVX1 U{len(lines)} ( .A({x}), .Y({y}) );")
            else:
                y = fresh()
                lines.append(f"AND2X1 U{len(lines)} ( .A(A[{i}]), .B(B[{j}]), .Y({y}) );")
            cols[i + j].append(y)
    for k in range(2 * n):
        while len(cols[k]) > 1 or (k + 1 < 2 * n and len(cols[k]) > 1):
            s, c = fresh(), fresh()
            if len(cols[k]) >= 3:
                x, y, z = cols[k].pop(0), cols[k].pop(0), cols[k].pop(0)
                lines.append(f"FAX1 U{len(lines)} ( .A({x}), .B({y}), .C({z}), .YS({s}), .YC({c}) );")
            else:
                x, y = cols[k].pop(0), cols[k].pop(0)
                lines.append(f"HAX1 U{len(lines)} ( .A({x}), .B({y}), .YS({s}), .YC({c}) );")
            cols[k].append(s)
            if k + 1 < 2 * n:
                cols[k + 1].append(c)
        lines.append(f"assign O[{k}] = {cols[k][0] if cols[k] else chr(49) + chr(39) + 'b0'};")
    wires = ", ".join(f"n{i}" for i in range(1, counter[0] + 1))
    return (f"module cells{n} ( A, B, O );\n  input [{n - 1}:0] A;\n  input [{n - 1}:0] B;\n"
            f"  output [{2 * n - 1}:0] O;\n  wire {wires};\n" + "\n".join(lines) + "\nendmodule\n")


def test_standard_cells_with_a_cell_map(tmp_path):
    text = cell_netlist(6)
    reference = Reference(text, CELLS).table()
    assert np.array_equal(reference, exact_table(6))
    netlist = tmp_path / "cells6.v"
    netlist.write_text(text)
    cell_json = tmp_path / "cells.json"
    cell_json.write_text(json.dumps(CELLS))
    cell_text = tmp_path / "cells.txt"
    cell_text.write_text("# cell library functions\n" + verilog.cell_map_text(CELLS) + "\n")
    for cell_map in (CELLS, str(cell_json), str(cell_text), verilog.cell_map_text(CELLS)):
        m = am.Multiplier.from_verilog(str(netlist), cell_map=cell_map)
        assert np.array_equal(m.table(), reference)
    m = am.Multiplier.from_verilog(str(netlist), cell_map=str(cell_json))
    assert m.spec.endswith(f"cells={cell_json}")
    assert np.array_equal(pickle.loads(pickle.dumps(m)).table(), reference)
    info = verilog.Netlist(str(netlist), cell_map=CELLS).info()
    assert info["cells.FAX1"] > 0 and info["cells.INVX1"] > 0



def test_cells_without_a_map(monkeypatch):
    text = cell_netlist(2)
    monkeypatch.setattr(verilog, "yosys_path", lambda: None)
    with pytest.raises(UnsupportedError, match="'NAND2X1', which is no gate primitive "
                       r"\(standard cells need a cell map\)"):
        am.Multiplier.from_verilog(text)
    monkeypatch.undo()
    # Yosys cannot know the cells either (it keeps them): the same reason, once, at the
    # netlist's own line rather than a line of Yosys's output
    with pytest.raises(UnsupportedError) as error:
        am.Multiplier.from_verilog(text)
    assert str(error.value).startswith("line 6: instance of 'NAND2X1'")
    assert str(error.value).count("standard cells need a cell map") == 1
    assert "Yosys" not in str(error.value)


def test_cell_map_errors():
    text = cell_netlist(2)
    with pytest.raises(FormatError, match="cell map line 2: .*expected 'CELL PIN = expression'"):
        am.Multiplier.from_verilog(text, cell_map="AND2X1 Y = A & B\nHAX1 = A\n")
    with pytest.raises(FormatError, match=r"line \d+: cell 'AND2X1' has no pin 'B'"):
        am.Multiplier.from_verilog(text, cell_map=dict(CELLS, AND2X1={"Y": "A"}))
    broken = text.replace(".B(B[1]), .Y(", ".Y(", 1)
    with pytest.raises(FormatError, match="input pin 'B' is not connected"):
        am.Multiplier.from_verilog(broken, cell_map=CELLS)


def test_signed_netlists_and_port_names():
    text = am.multiplier("exact:bits=6,signed=1").to_verilog()
    renamed = (text.replace("A[", "x[").replace("B[", "y[").replace("O[", "p[")
               .replace("(A, B, O)", "(x, y, p)").replace("] A;", "] x;")
               .replace("] B;", "] y;").replace("] O;", "] p;"))
    m = am.Multiplier.from_verilog(renamed, a="x", b="y", out="p", signed=True)
    assert np.array_equal(m.table(), exact_table(6, signed=True))
    with pytest.raises(InvalidArgumentError) as error:
        am.Multiplier.from_verilog(renamed)
    assert "has no input 'A'" in str(error.value)
    assert "its ports: input x[5:0], input y[5:0], output p[11:0]" in str(error.value)
    # the operand ports swapped: the table transposes
    swapped = am.Multiplier.from_verilog(fixture("mul3_primitives.v"), a="B", b="A")
    assert np.array_equal(swapped.table(), am.multiplier(fixture("mul3_primitives.v")).table().T)


def test_product_range_and_signedness():
    text = "module m(A, B, O); input [1:0] A, B; output [4:0] O; assign O = {A, A, 1'b1}; endmodule"
    with pytest.raises(am.OperandRangeError, match="outside the 4-bit unsigned product range"):
        am.Multiplier.from_verilog(text)


def test_module_selection():
    two = open(fixture("array4_ripple.v")).read() + open(fixture("mul3_primitives.v")).read()
    assert am.Multiplier.from_verilog(two, module="mul3_approx").bits == 3
    assert am.Multiplier.from_verilog(two, module="array4").bits == 4
    with pytest.raises(InvalidArgumentError, match="no module 'x'.*array4, mul3_approx"):
        am.Multiplier.from_verilog(two, module="x")


def test_wide_netlists_run_as_functions():
    m = am.Multiplier.from_verilog(am.multiplier("truncated:bits=14,cut=10").to_verilog())
    family = am.multiplier("truncated:bits=14,cut=10")
    assert m.plan == "function" and m.bits == 14
    rng = np.random.default_rng(1)
    for a, b in rng.integers(0, 1 << 14, size=(200, 2)):
        assert m.product(int(a), int(b)) == family.product(int(a), int(b))
    # whole rows (64 products per simulated block), signed too
    signed = am.multiplier("bam:bits=13,signed=1,hbl=2,vbl=9")
    back = am.Multiplier.from_verilog(signed.to_verilog(), signed=True)
    for a in (-4096, -1, 0, 1234, 4095):
        row = range(-4096, 4096, 7) if a else range(-4096, 4096)
        assert [back.product(a, b) for b in row] == [signed.product(a, b) for b in row]
    a = rng.integers(0, 1 << 14, size=(3, 5)).astype(np.uint16)
    b = rng.integers(0, 1 << 14, size=(5, 2)).astype(np.uint16)
    assert np.array_equal(am.matmul(a, b, m), am.matmul(a, b, family))


# ---------------------------------------------------------------- bad netlists

HEAD = "module m(A, B, O);\n  input [1:0] A, B;\n  output [3:0] O;\n"
GOOD_BODY = "  assign O = {A[1] & B[1], A[0] & B[1], A[1] & B[0], A[0] & B[0]};\n"

BAD = [
    ("  wire x, y;\n  assign x = y & A[0];\n  assign y = x;\n  assign O = {x, x, x, x};\n",
     FormatError, 5, "combinational loop: x (line 5) -> y (line 6)"),
    ("  wire x;\n  assign O = {x, x, x, A[0]};\n", FormatError, 5, "net 'x' has no driver"),
    ("  assign O[1:0] = A & B;\n", FormatError, 3, "output 'O[2]' has no driver"),
    (GOOD_BODY + "  assign O[1] = 1'b0;\n", FormatError, 5, "'O[1]' is driven twice (first at line 4)"),
    ("  assign O = {A, q};\n", FormatError, 4, "unknown identifier 'q'"),
    ("  assign O = A & B;\n", FormatError, 4, "a 2-bit value is assigned to 4 bits"),
    ("  assign O = {A & B[0], A};\n", FormatError, 4, "the operands of '&' are 2 and 1 bits wide"),
    ("  assign O = {A[2], A, 1'b0};\n", FormatError, 4, "bit 2 is outside input A[1:0]"),
    ("  assign O = {A[0:1], B};\n", FormatError, 4, "runs against the declaration"),
    ("  assign O = 4'b10x1;\n", FormatError, 4, "x or z bits"),
    ("  and (O[0], A[0]);\n", FormatError, 4, "needs at least 3 terminals"),
    ("  and (O[1:0], A[0], B[0]);\n", FormatError, 4, "and terminal 1 is 2 bits wide"),
    ("  assign A[0] = 1'b1;\n" + GOOD_BODY, FormatError, 4, "input 'A[0]' is driven inside"),
    ("  assign O = A * B;\n", UnsupportedError, 4, "operator '*'"),
    ("  reg [3:0] r;\n", UnsupportedError, 4, "'reg'"),
    ("  assign O = {A, B};\n  /* the end", FormatError, 5, "comment '/*' is not closed"),
    ("  assign O = {A, B};\n", FormatError, 5, "not closed by 'endmodule' (truncated file?)"),
    ("  assign O = {A, B}\nendmodule\n", FormatError, 5, "'endmodule' where"),
]


@pytest.mark.parametrize("body, kind, line, message", BAD)
def test_bad_netlists_give_one_clear_error(body, kind, line, message, monkeypatch):
    monkeypatch.setattr(verilog, "yosys_path", lambda: None)  # the plain reader's own message
    text = HEAD + body + ("endmodule\n" if "endmodule" not in message and "/*" not in body else "")
    with pytest.raises(kind) as error:
        am.Multiplier.from_verilog(text)
    assert message in str(error.value)
    assert str(error.value).startswith(f"line {line}:")
    if kind is FormatError:
        assert isinstance(error.value, verilog.NetlistError) and error.value.line == line


def test_files_cut_anywhere_fail_cleanly(tmp_path):
    text = open(fixture("mul3_primitives.v"), "rb").read()
    end = text.rindex(b"endmodule")
    for cut in range(0, end, 7):
        with pytest.raises(am.ApproxmulError):
            am.Multiplier.from_verilog(text[:cut])
    assert am.Multiplier.from_verilog(text[:end + len(b"endmodule")]).bits == 3


def test_limits_on_size_and_nesting():
    deep = HEAD + "  assign O = {A, B[1], " + "~(" * 5000 + "B[0]" + ")" * 5000 + "};\nendmodule\n"
    with pytest.raises(FormatError, match="nested deeper than 200 levels"):
        am.Multiplier.from_verilog(deep)
    with pytest.raises(FormatError, match="wider than 65536 bits"):
        am.Multiplier.from_verilog(HEAD + "  wire [70000:0] w;\nendmodule\n")
    with pytest.raises(FormatError, match="replication wider than"):
        am.Multiplier.from_verilog(HEAD + "  assign O = {99999{A}};\nendmodule\n")
    many = "  wire [65535:0] " + ", ".join(f"w{i}" for i in range(70)) + ";\n"
    with pytest.raises(FormatError, match="more than 4194304 nodes"):
        am.Multiplier.from_verilog(HEAD + many + "endmodule\n")
    with pytest.raises(FormatError, match="the netlist has 67108865 bytes; at most 67108864"):
        am.Multiplier.from_verilog(b" " * ((64 << 20) + 1))
    with pytest.raises(FormatError, match="not Verilog text"):
        am.Multiplier.from_verilog(b"module m(A, B, O);\x00")


# ---------------------------------------------------------------- Yosys

def test_behavioural_and_hierarchical_verilog_through_yosys(tmp_path):
    assert verilog.yosys_path(), "Yosys is required (Debian package yosys; CI installs it)"
    design = tmp_path / "design.v"
    design.write_text(
        "module sub(input [3:0] x, input [3:0] y, output [7:0] p);\n"
        "  assign p = x * y;\nendmodule\n"
        "module top(input [3:0] A, input [3:0] B, output [7:0] O);\n"
        "  wire [7:0] t;\n  sub u(.x(A), .y(B), .p(t));\n"
        "  assign O = t & 8'hfe;\nendmodule\n")
    m = am.multiplier(str(design))
    assert np.array_equal(m.table(), exact_table(4) & 0xFE)
    signed = tmp_path / "signed.v"
    signed.write_text("module s(input signed [4:0] A, input signed [4:0] B, output signed [9:0] O);\n"
                      "  reg signed [9:0] r;\n  always @(*) r = A * B;\n  assign O = r;\nendmodule\n")
    m = am.multiplier(f"verilog:{signed}?signed=1")
    assert np.array_equal(m.table(), exact_table(5, signed=True))


def test_without_yosys_the_error_says_what_to_install(tmp_path):
    design = tmp_path / "beh.v"
    design.write_text("module m(input [3:0] A, input [3:0] B, output [7:0] O);\n"
                      "  assign O = A * B;\nendmodule\n")
    code = ("import approxmul_cffi as am\n"
            f"try:\n    am.multiplier({str(design)!r})\n"
            "except am.UnsupportedError as e:\n    print(e)\n")
    env = dict(os.environ, PATH="")
    # cwd: a folder without the source package, which would shadow the installed one
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60, cwd=tmp_path)
    assert "operator '*'" in out.stdout and "install Yosys (Debian package yosys)" in out.stdout


# ---------------------------------------------------------------- command line

def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "approxmul_cffi.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def test_cli_netlist_metrics_and_evaluate(tmp_path):
    path = tmp_path / "trunc.v"
    out = cli("netlist", "--family", "truncated:cut=8", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    path.write_text(out.stdout)
    out = cli("netlist", str(path), "--json", cwd=tmp_path)
    info = json.loads(out.stdout)
    assert info["bits"] == 8 and info["out"] == "O[15:0]" and info["depth"] > 0
    assert info["gates"] == sum(v for k, v in info.items() if k.startswith("gates."))
    out = cli("netlist", fixture("array4_ripple.v"), cwd=tmp_path)
    assert "meta.AREA" in out.stdout and "123.5 um2" in out.stdout
    out = cli("metrics", "--json", str(path), "truncated:cut=8", cwd=tmp_path)
    rows = json.loads(out.stdout)
    assert rows[0]["spec"] == f"verilog:{path}?signed=0"
    assert {k: v for k, v in rows[0].items() if k != "spec"} == \
        {k: v for k, v in rows[1].items() if k != "spec"}
    out = cli("evaluate", "--limit", "40", "-m", str(path), "--multiplier", "truncated:cut=8",
              "--threads", "1", "--json", "r.json", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "r.json").read_text())
    assert rows[-2]["multiplier"] == str(path) and rows[-1]["multiplier"] == "truncated:cut=8"
    same = ("mae_percent", "wce_percent", "top1", "delta_vs_exact")
    assert [rows[-2][k] for k in same] == [rows[-1][k] for k in same]
    out = cli("show", str(path), "--out", "trunc.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "trunc.png").read_bytes()[:4] == b"\x89PNG"
    out = cli("netlist", str(tmp_path / "missing.v"), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    bad = tmp_path / "bad.v"
    bad.write_text(HEAD + "  assign O = {A, A};\n  assign O[0] = B[0];\nendmodule\n")
    out = cli("metrics", str(bad), cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{bad}: line 5: net 'O[0]' is driven twice" in out.stderr


# ---------------------------------------------------------------- signedness of netlists

SIGNED_SPEC = "truncated:bits=8,signed=1,cut=6,correct=1"


def without_header(text):
    return "\n".join(line for line in text.splitlines() if not line.startswith("//")) + "\n"


def one_line_error(out, command):
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"approxmul {command}: error: ")
    return out.stderr


def test_cli_signed_flag_reads_a_netlist_signed(tmp_path):
    # a signed netlist written by `approxmul netlist`, read with --signed as a table file is
    out = cli("netlist", "--family", SIGNED_SPEC, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    path = tmp_path / "st.v"
    path.write_text(out.stdout)
    family = am.multiplier(SIGNED_SPEC).metrics()
    out = cli("metrics", "--json", str(path), "--signed", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    row = json.loads(out.stdout)[0]
    assert row["spec"] == f"verilog:{path}?signed=1" and row["signed"] is True
    assert row["mae"] == family["mae"] and row["wce"] == family["wce"]
    # relative paths and verilog: specs without signed= take --signed too
    for spec in ("st.v", f"verilog:{path}", f"verilog:{path}?module="
                 "truncated_bits_8_signed_1_cut_6_correct_1"):
        out = cli("metrics", "--json", spec, "--signed", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)[0]["mae"] == family["mae"], spec
    # evaluate: the netlist's error is the family's, not chance accuracy
    out = cli("evaluate", "--limit", "40", "-m", str(path), "--multiplier", SIGNED_SPEC,
              "--signed", "--threads", "1", "--json", "r.json", "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "r.json").read_text())
    same = ("mae_percent", "wce_percent", "top1", "delta_vs_exact")
    assert [rows[-2][k] for k in same] == [rows[-1][k] for k in same]


def test_cli_refuses_a_netlist_whose_header_says_signed_read_unsigned(tmp_path):
    path = tmp_path / "st.v"
    path.write_text(am.multiplier(SIGNED_SPEC).to_verilog())
    for command in (["metrics", str(path)],
                    ["evaluate", "--limit", "8", "-m", str(path), "--no-progress"]):
        error = one_line_error(cli(*command, cwd=tmp_path), command[0])
        assert f"{path}: read unsigned, but its header says it was written as {SIGNED_SPEC}" \
            in error
        assert "pass --signed" in error
    # stated (signed=0 in the spec): read as said, with a warning
    out = cli("metrics", "--json", f"verilog:{path}?signed=0", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["signed"] is False
    assert out.stderr == (f"approxmul: warning: {path}: read unsigned, but its header says it "
                          f"was written as {SIGNED_SPEC}\n")
    # an unsigned netlist read with --signed: a warning too
    unsigned = tmp_path / "ut.v"
    unsigned.write_text(am.multiplier("truncated:bits=8,cut=6").to_verilog())
    out = cli("metrics", str(unsigned), "--signed", cwd=tmp_path)
    assert out.returncode == 0 and "read signed, but its header says" in out.stderr


def test_netlist_read_in_the_other_signedness_warns(tmp_path):
    import warnings

    path = tmp_path / "st.v"
    path.write_text(am.multiplier(SIGNED_SPEC).to_verilog())
    with pytest.warns(verilog.NetlistSignednessWarning, match="read unsigned, but its header says "
                      f"it was written as {SIGNED_SPEC}: probably signed") as caught:
        m = am.multiplier(str(path))
    assert caught[0].filename == __file__  # the user's line, not the package's
    assert m.signed is False
    # headerless: judged by the products, as table files are
    bare = without_header(am.multiplier("exact:bits=6,signed=1").to_verilog())
    with pytest.warns(verilog.NetlistSignednessWarning,
                      match=r"its products are 4\d\.\d % .* and 0 % read signed"):
        am.Multiplier.from_verilog(bare)
    unsigned = without_header(am.multiplier("bam:bits=8,hbl=1,vbl=5").to_verilog())
    with pytest.warns(verilog.NetlistSignednessWarning, match="read signed, but its products"):
        am.Multiplier.from_verilog(unsigned, signed=True)
    with warnings.catch_warnings():  # read as written: not a word
        warnings.simplefilter("error")
        assert am.multiplier(str(path), signed=True).signed
        am.Multiplier.from_verilog(bare, signed=True)
        am.Multiplier.from_verilog(unsigned)
        am.multiplier(fixture("mul3_primitives.v"))


# ---------------------------------------------------------------- one reason per error

PORTS_XYZ = ("module m (X, Y, Z);\n  input [3:0] X, Y;\n  output [7:0] Z;\n"
             "  assign Z = X * Y;\nendmodule\n")

CELLS_NO_MAP = ("// a standard-cell netlist\nmodule c2 (A, B, O);\n  input [1:0] A;\n"
                "  input [1:0] B;\n  output [3:0] O;\n  wire n1;\n\n\n\n"
                "  NAND2 u1 (.A(A[0]), .B(B[0]), .Y(n1));\n  INV u2 (.A(n1), .Y(O[0]));\n"
                "  assign O[3:1] = 3'b000;\nendmodule\n")


def test_errors_after_lowering_by_yosys_give_one_reason(tmp_path):
    assert verilog.yosys_path(), "Yosys is required (Debian package yosys; CI installs it)"
    xyz = tmp_path / "xyz.v"
    xyz.write_text(PORTS_XYZ)
    # Yosys lowered the '*': what is left is the ports, in the user's file
    with pytest.raises(InvalidArgumentError) as error:
        am.multiplier(str(xyz))
    assert str(error.value) == (f"{xyz}: module 'm' has no input 'A' (the first operand); its "
                                "ports: input X[3:0], input Y[3:0], output Z[7:0]; name the "
                                "ports with a=")
    assert am.multiplier(f"verilog:{xyz}?a=X&b=Y&out=Z").product(15, 15) == 225
    error = one_line_error(cli("netlist", str(xyz), cwd=tmp_path), "netlist")
    assert f"{xyz}: module 'm' has no input 'A'" in error
    assert error.rstrip().endswith("name them with --a, --b and --out")
    assert "Yosys" not in error and "operator" not in error
    out = cli("netlist", str(xyz), "--a", "X", "--b", "Y", "--out", "Z", "--json", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["bits"] == 4
    error = one_line_error(cli("metrics", "xyz.v", cwd=tmp_path), "metrics")  # specs name ports
    assert f"{xyz}: module 'm' has no input 'A'" in error and "Yosys" not in error
    assert error.rstrip().endswith(f"name them in a spec: verilog:{xyz}?a=..&b=..&out=..")
    out = cli("metrics", "--json", "verilog:xyz.v?a=X&b=Y&out=Z", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)[0]["mae"] == 0
    # cells without a map: Yosys keeps them; the reason once, at the user's line
    cells = tmp_path / "cells.v"
    cells.write_text(CELLS_NO_MAP)
    for command in ("netlist", "metrics"):
        error = one_line_error(cli(command, str(cells), cwd=tmp_path), command)
        assert f"{cells}: line 10: instance of 'NAND2', which is no gate primitive" in error
        assert error.count("NAND2") == 1 and "Yosys" not in error and "line 11" not in error
        assert ("--cell-map FILE" in error) == (command == "netlist")
    # Yosys fails too: both reasons, Yosys's naming the user's file, not its copy
    broken = tmp_path / "broken.v"
    broken.write_text("module m(input [3:0] A, B, output [7:0] O);\n  assign O = A * B +;\n"
                      "endmodule\n")
    error = one_line_error(cli("metrics", str(broken), cwd=tmp_path), "metrics")
    assert f"{broken}: line 2: operator '*'" in error
    assert f"Yosys could not lower it either: {broken}:2:" in error
    assert "approxmul-yosys-" not in error and "install Yosys" not in error


def test_without_yosys_the_advice_to_install_it_is_given_once(tmp_path, monkeypatch):
    monkeypatch.setattr(verilog, "yosys_path", lambda: None)
    xyz = tmp_path / "xyz.v"
    xyz.write_text(PORTS_XYZ)
    with pytest.raises(UnsupportedError) as error:
        am.multiplier(str(xyz))
    message = str(error.value)
    assert message.startswith(f"{xyz}: line 4: operator '*' (arithmetic or comparison)")
    assert message.count("install Yosys (Debian package yosys)") == 1


def test_cli_netlist_help_and_family_options(tmp_path):
    out = cli("netlist", "--help", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "``" not in out.stdout and "(// NAME = value unit)" in out.stdout
    for extra in (["--json"], ["--a", "X"], ["--cell-map", "cells.json"]):
        error = one_line_error(cli("netlist", "--family", "exact", *extra, cwd=tmp_path),
                               "netlist")
        assert f"{extra[0]}: options for reading FILE.v" in error
    out = cli("netlist", "--family", "exact:bits=2", cwd=tmp_path)
    assert out.returncode == 0 and "module exact_bits_2_signed_0" in out.stdout
