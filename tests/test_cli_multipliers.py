"""``approxmul metrics`` and ``approxmul show`` run as subprocesses."""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile

import pytest


def approxmul(*args):
    # python -m: the console script only exists after pip install
    return subprocess.run([sys.executable, "-m", "approxmul_cffi.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=tempfile.gettempdir(), env=dict(os.environ))


def test_metrics_table():
    out = approxmul("metrics", "drum:k=4", "mitchell")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:5] == ["spec", "MAE", "MAE%", "WCE", "WCE%"]
    assert lines[1].split()[0] == "drum:bits=8,signed=0,k=4" and lines[1].split()[3] == "7425"
    assert lines[2].split()[:2] == ["mitchell:bits=8,signed=0", "606.4"]


def test_metrics_json_and_csv(tmp_path):
    out = approxmul("metrics", "--json", "truncated:cut=8", "exact:bits=4,signed=1")
    rows = json.loads(out.stdout)
    assert rows[0]["mae"] == 448.25 and rows[0]["wce"] == 1793 and rows[1]["mae"] == 0
    assert rows[1]["signed"] is True and rows[1]["bits"] == 4
    out = approxmul("metrics", "--csv", "ilm:iterations=1")
    row = next(csv.DictReader(io.StringIO(out.stdout)))
    assert row["spec"] == "ilm:bits=8,signed=0,iterations=1" and row["wce"] == "3969"


def test_metrics_of_a_table_file(tmp_path):
    import approxmul_cffi as am

    am.multiplier("roba").save(tmp_path / "roba.bin")
    out = approxmul("metrics", "--json", str(tmp_path / "roba.bin"))
    assert json.loads(out.stdout)[0]["wce"] == 4096


def test_usage_errors_are_one_line():
    out = approxmul("metrics", "drmu")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "unknown multiplier family 'drmu'" in out.stderr
    out = approxmul("metrics", "/nonexistent/t.bin")
    assert out.returncode == 2 and "cannot read table file" in out.stderr


def test_show_draws_the_error_map(tmp_path):
    import matplotlib.image  # a test extra: CI has it
    import numpy as np

    images = {}
    for spec in ("drum:k=3,signed=1", "exact:signed=1"):
        target = tmp_path / (spec.split(":")[0] + spec[-8:-7] + ".png")
        out = approxmul("show", spec, "--out", str(target))
        assert out.returncode == 0, out.stderr
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        images[spec] = matplotlib.image.imread(target)[..., :3]
    drum = images["drum:k=3,signed=1"]
    height, width, _ = drum.shape
    assert height >= 300 and width >= 600  # a heatmap and a histogram side by side
    colours = np.unique((drum * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 100, "the image is (nearly) blank"
    # the error map follows the multiplier: the exact one's differs
    exact = images["exact:signed=1"]
    assert exact.shape == drum.shape
    assert (np.abs(exact - drum).max(axis=-1) > 0.1).mean() > 0.02


def test_show_without_matplotlib_says_so(tmp_path):
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('blocked', name='matplotlib')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "approxmul_cffi.cli", "show", "mitchell", "--out",
                          str(tmp_path / "x.png")], capture_output=True, text=True, env=env,
                         cwd=tempfile.gettempdir())
    assert out.returncode == 2 and "needs matplotlib" in out.stderr and "approxmul[plot]" in out.stderr


def assert_one_line_error(out, command, *words):
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"approxmul {command}: error:")
    for word in words:
        assert word in out.stderr


def test_show_refuses_what_it_cannot_draw(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "big.png"
    # 16 bits: 2^32 pairs (32 GiB of errors) was allocated before failing
    out = approxmul("show", "drum:bits=16,k=8", "--out", str(target))
    assert_one_line_error(out, "show", "16-bit", "at most 12-bit")
    out = approxmul("show", "mitchell", "--out", str(tmp_path / "y.xyz"))
    assert_one_line_error(out, "show", "y.xyz", ".xyz", ".png")
    out = approxmul("show", "mitchell", "--out", str(tmp_path / "noextension"))
    assert_one_line_error(out, "show", "missing extension")
    assert list(tmp_path.iterdir()) == []


def test_error_map_refuses_wide_multipliers_before_allocating():
    import approxmul_cffi as am

    with pytest.raises(am.UnsupportedError, match="at most 12"):
        am.multiplier("drum:bits=16,k=8").error_map()


def test_block_extremes_keeps_each_block_s_largest_error():
    np = pytest.importorskip("numpy")
    from approxmul_cffi.cli.show import block_extremes

    rng = np.random.default_rng(3)
    errors = rng.integers(-50, 50, size=(64, 64))
    got = block_extremes(errors, 8)
    for i in range(8):  # plain reference: scan each tile in row-major order
        for j in range(8):
            best = 0
            for value in errors[8 * i:8 * i + 8, 8 * j:8 * j + 8].ravel():
                if abs(value) > abs(best):
                    best = value
            assert got[i, j] == best


@pytest.mark.parametrize("command", ["metrics", "show", "evaluate", "info", "layers"])
def test_help_is_plain_text(command):
    out = approxmul(command, "--help")
    assert out.returncode == 0, out.stderr
    for markup in ("``", ":func:", ":class:", ":meth:", ":mod:"):
        assert markup not in out.stdout


def test_layers_lists_shapes_and_multiply_accumulates(tmp_path):
    out = approxmul("layers")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
    # the bundled LeNet: conv1 1->16 3x3 on 8x8 (same padding), conv2 16->32 3x3 on 4x4,
    # fc1 128->64, fc2 64->10; MACs = output elements * weights per output element
    assert rows["conv1"][1:4] == ["Conv2d", "input", "16x8x8"]
    assert rows["conv1"][-1] == f"{16 * 8 * 8 * 1 * 3 * 3:,}"
    assert rows["conv2"][-1] == f"{32 * 4 * 4 * 16 * 3 * 3:,}"
    assert rows["fc1"][-1] == f"{64 * 128:,}" and rows["fc2"][-1] == f"{10 * 64:,}"
    assert rows["relu1"][-1] == "0"
    total = 16 * 64 * 9 + 32 * 16 * 16 * 9 + 64 * 128 + 10 * 64
    assert rows["total"][-1] == f"{total:,}"
    out = approxmul("layers", "--json")
    listed = json.loads(out.stdout)
    assert [r["name"] for r in listed][:2] == ["conv1", "bn1"]
    assert listed[0]["parameters"] == 16 * 9 + 16
    assert_one_line_error(approxmul("layers", str(tmp_path / "missing.json")), "layers",
                          "missing.json")


@pytest.fixture
def table_files(tmp_path):
    import approxmul_cffi as am

    am.multiplier("exact:signed=1").save(tmp_path / "signed.bin")
    am.multiplier("drum:k=4,signed=1").save(tmp_path / "offset.txt", order="offset")
    am.multiplier("drum:k=4").save(tmp_path / "unsigned.bin")
    return tmp_path


def test_table_read_in_the_wrong_convention_is_refused_with_the_flags_that_fit(table_files):
    out = approxmul("metrics", str(table_files / "signed.bin"))
    assert_one_line_error(out, "metrics", "signed.bin", "49.6 %", "with --signed it is 0 %")
    out = approxmul("metrics", "--signed", str(table_files / "offset.txt"))
    assert_one_line_error(out, "metrics", "offset.txt", "with --signed --order offset")
    out = approxmul("metrics", "--signed", str(table_files / "unsigned.bin"))
    # stated by the user: read as said, with a warning naming what fits
    assert out.returncode == 0, out.stderr
    assert "warning" in out.stderr and "with no --signed it is" in out.stderr
    out = approxmul("evaluate", "-m", str(table_files / "signed.bin"), "--limit", "5",
                    "--no-progress")
    assert out.returncode == 2 and "with --signed it is 0 %" in out.stderr
    assert out.stderr.count("\n") == 1
    out = approxmul("show", str(table_files / "signed.bin"), "--out",
                    str(table_files / "x.png"))
    assert_one_line_error(out, "show", "with --signed it is 0 %")


def test_metrics_reports_the_convention_of_table_files(table_files):
    out = approxmul("metrics", "--signed", "--order", "offset", str(table_files / "offset.txt"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[1] == "240.7"  # drum:k=4's MAE, as written
    assert ("read as signed=True, order='offset'; closest to the exact product as "
            "signed=True, order='offset'") in out.stdout
    out = approxmul("metrics", "--json", "--signed", str(table_files / "signed.bin"))
    facts = json.loads(out.stdout)[0]["convention"]
    assert facts["read_as"] == facts["closest_to_exact"] == "signed=True, order='raw'"
    assert facts["mae_percent_by_convention"]["signed=False"] == pytest.approx(49.609375)


def test_damaged_numpy_tables_are_one_line(tmp_path):
    np = pytest.importorskip("numpy")
    import zipfile

    np.savez(tmp_path / "good.npz", table=np.arange(16).reshape(4, 4))
    whole = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "trunc.npz").write_bytes(whole[:len(whole) // 2])
    np.save(tmp_path / "empty.npy", np.zeros((0, 0), np.int32))
    (tmp_path / "header.npy").write_bytes(b"\x93NUMPY\x01\x00\x20\x00{'descr': '<i4', 'sha" +
                                          b" " * 40)
    (tmp_path / "garbage.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'O'}\n" +
                                           bytes(range(200)))
    with zipfile.ZipFile(tmp_path / "objects.npz", "w") as archive:
        buffer = io.BytesIO()
        np.save(buffer, np.array([{"x": 1}, None], dtype=object), allow_pickle=True)
        archive.writestr("table.npy", buffer.getvalue())
    for name, words in [("trunc.npz", ["trunc.npz", "truncated or corrupt"]),
                        ("empty.npy", ["empty.npy", "shape (0, 0)"]),
                        ("header.npy", ["header.npy", "corrupt header"]),
                        ("garbage.npy", ["garbage.npy"]),
                        ("objects.npz", ["objects.npz", "pickled Python objects",
                                         "refused for safety"])]:
        out = approxmul("metrics", str(tmp_path / name))
        assert_one_line_error(out, "metrics", *words)
        assert "allow_pickle" not in out.stderr
    out = approxmul("metrics", "file:/dev/zero?format=binary")
    assert_one_line_error(out, "metrics", "/dev/zero", "larger than")
