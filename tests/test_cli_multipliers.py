"""``approxmul metrics`` and ``approxmul show`` run as subprocesses."""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile



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
