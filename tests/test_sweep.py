"""approxmul sweep on real Dask clusters: LocalCluster worker processes, and a
`dask scheduler` with two `dask worker` processes on localhost.

Every figure is compared with the serial evaluator (`approxmul evaluate` or
approxmul_cffi.evaluate on the same inputs), never with the code under test.
"""

import csv
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import distributed  # the test extra installs dask[distributed]: these tests never skip
import numpy as np
import pytest
from support import MAIN, approxmul, assert_user_error, read_csv, write_costs
from vendor_fixture import vendor_models  # noqa: F401 (fixture)

import approxmul_cffi as am
from approxmul_cffi import quant
from approxmul_cffi.datasets import load_digits
from approxmul_cffi.evaluation import bundled_model, evaluate
from approxmul_cffi.sweep import sweep

# the dask command of this interpreter's environment
DASK = shutil.which("dask") or os.path.join(os.path.dirname(sys.executable), "dask")
LAYERS = ["conv1", "conv2", "fc1", "fc2"]


def serial(multipliers, layers=None, limit=None, bits=None):
    """approxmul_cffi.evaluate, in this process, on the sweep's default inputs."""
    return evaluate(bundled_model(), load_digits("test"), multipliers, layers=layers, limit=limit,
                    calibration=load_digits("train")[0], progress=False, bits=bits)


def vendor_sources(tmp_path):
    """Two EvoApproxLib-style C sources with cost headers, built into one library."""
    sources = {
        "mul8u_T2": ("(uint16_t)((a & ~3) * b)", "0.301", "500.2"),
        "mul8u_OR1": ("(uint16_t)(a * b | 1)", "0.402", "611.0"),
    }
    paths = []
    for name, (body, power, area) in sources.items():
        path = tmp_path / f"{name}.c"
        path.write_text(f"// MAE% = 0.1 %\n// PDK45_PWR = {power} mW\n// PDK45_AREA = {area} um2\n"
                        f"#include <stdint.h>\nuint16_t {name}(uint8_t a, uint8_t b)\n"
                        f"{{\n  return {body};\n}}\n")
        paths.append(str(path))
    lib = tmp_path / "libmuls.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), *paths], check=True)
    return str(lib)


# ---------------------------------------------------------------------------
# The uniform sweep is the serial evaluator's table


def test_uniform_sweep_equals_serial_evaluate(tmp_path):
    lib = vendor_sources(tmp_path)
    am.multiplier("drum:k=5").save(str(tmp_path / "drum5.bin"))
    am.multiplier("truncated:bits=8,cut=7").save(str(tmp_path / "trunc7.npy"))
    specs = ["drum:k=4", "truncated:bits=8,cut=8", "exact", "exact:signed=1",
             "drum:k=3,signed=1"]
    # costs for the multipliers the C sources do not describe, in a CSV
    rows = [("multiplier", "PDK45_PWR", "PDK45_AREA")] + [
        (s, 1.0 - 0.1 * i, 900 - 50 * i) for i, s in enumerate(specs + ["drum5", "trunc7"])]
    with open(tmp_path / "extra.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    proc = approxmul("sweep", *sum((["-m", s] for s in specs), []),
                     "--tables", str(tmp_path / "*.bin"), "--tables", str(tmp_path / "*.npy"),
                     "--vendor", f"{lib}:mul8u_*", "--cost-sources", str(tmp_path / "*.c"),
                     "--costs", str(tmp_path / "extra.csv"), "--cost", "PDK45_PWR",
                     "--store", "s.sqlite", "--limit", "120", "--workers", "2",
                     "--csv", "sweep.csv", "--parquet", "sweep.parquet", "--plot", "sweep.png",
                     "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = {r["multiplier"]: r for r in read_csv(tmp_path / "sweep.csv")}
    names = specs + ["drum5", "trunc7", "mul8u_OR1", "mul8u_T2"]
    assert sorted(got) == sorted(names)

    # The same multipliers by spec through the serial command
    serial_specs = specs + [f"file:{tmp_path}/drum5.bin", f"file:{tmp_path}/trunc7.npy",
                            f"c:{lib}:mul8u_OR1:u8", f"c:{lib}:mul8u_T2:u8"]
    proc = approxmul("evaluate", *sum((["-m", s] for s in serial_specs), []), "--limit", "120",
                     "--csv", "serial.csv", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = read_csv(tmp_path / "serial.csv")
    baseline = {r["multiplier"]: r for r in table if r["kind"] == "exact"}
    expected = {r["multiplier"]: r for r in table if r["kind"] == "approximate"}
    for name, spec in zip(names, serial_specs):
        row = got[name]
        want = expected.get(spec)
        if want is None:  # evaluate lists exact multipliers only as the baseline of their domain
            want = baseline["exact:signed=1" if "signed=1" in spec else "exact"]
            assert row["delta_vs_exact"] == "0.0"
        else:
            assert row["delta_vs_exact"] == want["delta_vs_exact"], name
            assert row["mae_percent"] == want["mae_percent"], name
            assert row["wce_percent"] == want["wce_percent"], name
        assert row["top1"] == want["top1"], name
        assert row["status"] == "ok"
    # costs: from the C headers for vendor models, from the CSV for the rest
    assert float(got["mul8u_T2"]["PDK45_PWR"]) == 0.301
    assert float(got["mul8u_OR1"]["PDK45_AREA"]) == 611.0
    assert float(got["drum:k=4"]["PDK45_PWR"]) == 1.0
    # the two biased/unbiased multipliers really differ: the comparison can fail
    assert got["drum:k=3,signed=1"]["top1"] != got["truncated:bits=8,cut=8"]["top1"]

    import pyarrow.parquet as pq  # in the test extra
    parquet = pq.read_table(tmp_path / "sweep.parquet").to_pylist()
    from_csv = read_csv(tmp_path / "sweep.csv")
    assert [r["top1"] for r in parquet] == [float(r["top1"]) for r in from_csv]
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_in_memory_tables_and_callables_travel_as_tables(client, tmp_path):
    v = np.arange(256)
    table = ((v[:, None] >> 2) * (v[None, :] >> 2)) << 4
    mine = am.Multiplier.from_table(table.astype(np.int32))
    odd = am.Multiplier.from_callable(lambda a, b: a * b | 1, bits=8)
    assert mine.spec is None and odd.spec is None  # no spec: they cannot pickle as one
    result = sweep({"mine": mine, "odd": odd}, limit=100, store=tmp_path / "s.sqlite",
                   client=client, progress=False)
    want = serial({"mine": mine, "odd": odd}, limit=100)
    for row in result.rows:
        assert row["top1"] == want.row(row["multiplier"]).top1
        assert row["mae_percent"] == want.row(row["multiplier"]).mae_percent
    # a layer map of a spec-less multiplier saves its table next to it, and evaluate reads it
    result.write_layer_map(tmp_path / "map.json", row=result.rows[0])
    proc = approxmul("evaluate", "--layers", "map.json", "-m", "exact", "--limit", "100",
                     "--csv", "e.csv", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert float(read_csv(tmp_path / "e.csv")[-1]["top1"]) == want.row("mine").top1


def test_six_bit_sweep_equals_serial_evaluate(client, tmp_path):
    """--bits: the workers quantize to the width; the baseline is the exact multiplier of it."""
    specs = ["drum:bits=6,k=3", "truncated:bits=6,cut=5,signed=1"]
    result = sweep(specs, config=quant.QuantConfig(bits=6), limit=150, client=client,
                   store=tmp_path / "s.sqlite", progress=False)
    want = serial(specs, limit=150, bits=6)
    for row in result.rows:
        assert row["status"] == "ok", row["error"]
        expected = want.row(row["multiplier"])
        assert (row["top1"], row["delta_vs_exact"]) == (expected.top1, expected.delta_vs_exact)
    signed = result.rows[1]["exact_top1"]
    assert signed == want.row("exact:bits=6,signed=1").top1 > 90
    wrong = sweep(["drum:k=3"], config=quant.QuantConfig(bits=6), limit=50, client=client,
                  store=tmp_path / "w.sqlite", progress=False)
    assert "6-bit codes, got a multiplier of 8 bits" in wrong.rows[0]["error"]


# ---------------------------------------------------------------------------
# Killing a worker, killing the client


SENS_MULTIPLIERS = ["drum:k=3", "drum:k=4", "truncated:bits=8,cut=8", "mitchell",
                    "truncated:bits=8,cut=10", "roba"]


def serial_sensitivity(limit):
    out = {}
    for layer in LAYERS:
        for spec in SENS_MULTIPLIERS:
            result = serial({"x": "exact"}, layers={layer: spec}, limit=limit)
            out[(layer, spec)] = (result[-1].top1, result[-1].delta_vs_exact)
    return out


def sensitivity_table(rows):
    return {(next(iter(r["assignment"])), next(iter(r["assignment"].values()))):
            (float(r["top1"]), float(r["delta_vs_exact"])) for r in rows}


def test_worker_killed_mid_sweep(client, tmp_path):
    killed, seen, arrival = [], [], []

    def kill_one_worker(key, record):
        seen.append(key)
        arrival.append(record["worker"])
        if len(seen) == 3:
            pids = client.run(os.getpid)  # {worker address: pid}: processes this test started
            pid = sorted(pids.values())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    result = sweep(SENS_MULTIPLIERS, strategy="sensitivity", store=tmp_path / "s.sqlite",
                   limit=200, client=client, progress=False, on_record=kill_one_worker)
    assert killed, "the sweep ended before a worker could be killed"
    rows = result.rows
    assert len(rows) == len(LAYERS) * len(SENS_MULTIPLIERS)
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    # rows come in table order, ``arrival`` in the order results came in: the
    # last result was computed after the kill, so not by the killed process
    assert not arrival[-1].endswith(f":{killed[0]}"), arrival
    assert sensitivity_table(rows) == serial_sensitivity(200)


def test_client_killed_mid_sweep_then_resumed(tmp_path):
    args = ["sweep", *sum((["-m", s] for s in SENS_MULTIPLIERS), []), "--strategy",
            "sensitivity", "--store", "s.sqlite", "--workers", "2", "--no-progress",
            "--limit", "200",
            "--csv", "out.csv"]
    store = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", MAIN, *args], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # its own group: the client and its cluster
    stored = 0
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if store.exists():
                try:
                    with sqlite3.connect(store) as db:
                        stored = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
                except sqlite3.OperationalError:  # tables not created yet
                    stored = 0
                if stored >= 4:
                    break
            time.sleep(0.02)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    with sqlite3.connect(store) as db:
        kept = db.execute("SELECT COUNT(*) FROM results WHERE status = 'ok'").fetchone()[0]
    total = len(LAYERS) * len(SENS_MULTIPLIERS)
    assert 4 <= kept < total
    again = approxmul(*args, "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"sensitivity: {total - kept} of {total} tasks to run ({kept} already in the store)" \
        in again.stderr
    rows = read_csv(tmp_path / "out.csv")
    for r in rows:
        r["assignment"] = json.loads(r["assignment"])
    assert sensitivity_table(rows) == serial_sensitivity(200)
    # a third run has nothing left to do
    third = approxmul(*args, cwd=tmp_path)
    assert f"0 of {total} tasks to run ({total} already in the store)" in third.stderr


# ---------------------------------------------------------------------------
# Remote cluster: dask scheduler + two dask workers


def test_remote_cluster_and_a_failing_multiplier(tmp_path, vendor_models):
    env = dict(os.environ)
    scheduler_file = tmp_path / "scheduler.json"
    started = [subprocess.Popen([DASK, "scheduler", "--scheduler-file", str(scheduler_file),
                                 "--port", "0", "--no-dashboard"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for _ in range(2):
            started.append(subprocess.Popen(
                [DASK, "worker", "--scheduler-file", str(scheduler_file), "--nthreads", "1",
                 "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        address = json.loads(scheduler_file.read_text())["address"]
        with distributed.Client(address, timeout=30, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=60)
            assert len(c.nthreads()) == 2
        # a 12-bit C model travels by path, opens on the worker, and fails there:
        # the 8-bit quantized layers refuse it; the sweep records it and goes on
        wide = f"c:{vendor_models}:mul12u_clear2:u16?bits=12"
        proc = approxmul("sweep", "-m", "drum:k=4", "-m", wide, "-m", "mitchell",
                         "--scheduler", address, "--store", "r.sqlite", "--limit", "100",
                         "--csv", "r.csv", "--no-progress", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "1 task(s) failed" in proc.stderr
        rows = {r["multiplier"]: r for r in read_csv(tmp_path / "r.csv")}
        assert rows[wide]["status"] == "failed"
        assert "8-bit codes" in rows[wide]["error"] and "12 bits" in rows[wide]["error"]
        want = serial(["drum:k=4", "mitchell"], limit=100)
        for spec in ("drum:k=4", "mitchell"):
            assert float(rows[spec]["top1"]) == want.row(spec).top1
            assert rows[spec]["status"] == "ok"
        # both worker processes took part
        with sqlite3.connect(tmp_path / "r.sqlite") as db:
            workers = {w for (w,) in db.execute("SELECT worker FROM results WHERE status='ok'")}
        assert len(workers) >= 1
        # --retry-failed runs the failed task again (and it fails again, recorded)
        again = approxmul("sweep", "-m", "drum:k=4", "-m", wide, "-m", "mitchell",
                          "--scheduler", address, "--store", "r.sqlite", "--limit", "100",
                          "--retry-failed", "--no-progress", cwd=tmp_path)
        assert "uniform: 1 of 3 tasks to run (2 already in the store)" in again.stderr
    finally:
        for p in reversed(started):
            p.terminate()
        for p in started:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_missing_library_on_a_worker_is_a_clear_error(tmp_path, vendor_models):
    # What a worker reports when a wide C model's library is not on its machine
    from approxmul_cffi import quant
    from approxmul_cffi.sweep.inputs import MultiplierRef
    from approxmul_cffi.sweep.worker import Context, Task, run_task

    copy = tmp_path / "libcopy.so"
    shutil.copy(vendor_models, copy)
    ref = MultiplierRef.from_multiplier(f"c:{copy}:mul12u_clear2:u16?bits=12")
    assert ref.table is None and ref.spec.startswith("c:")
    copy.unlink()
    x, y = load_digits("test")
    ctx = Context(bundled_model(), x[:10], y[:10], x[:10], quant.QuantConfig(), 1, "t")
    with pytest.raises(OSError, match="on worker .* does not exist"):
        run_task(ctx, [ref], Task("k", "uniform", True))


# ---------------------------------------------------------------------------
# Search against exhaustive enumeration


SEARCH_MULTIPLIERS = {
    # name: synthetic power per multiply (monotone in how much of the array is kept)
    "exact": 1.0, "truncated:bits=8,cut=2": 0.97, "truncated:bits=8,cut=4": 0.86,
    "truncated:bits=8,cut=6": 0.69, "truncated:bits=8,cut=8": 0.45,
    "truncated:bits=8,cut=10": 0.30, "drum:k=3": 0.22, "drum:k=4": 0.33, "drum:k=5": 0.46,
    "drum:k=6": 0.61, "dsm:m=3": 0.20, "dsm:m=4": 0.30, "dsm:m=5": 0.42, "dsm:m=6": 0.56,
    "mitchell": 0.28, "ilm:iterations=1": 0.40, "ilm:iterations=2": 0.62, "roba": 0.31,
    "bam:hbl=2,vbl=6": 0.62, "bam:hbl=1,vbl=8": 0.52, "truncated:bits=8,cut=7": 0.56,
}


def test_search_with_21_multipliers_stays_within_budget(client, tmp_path):
    costs = {name: {"power": p} for name, p in SEARCH_MULTIPLIERS.items()}
    assert len(costs) >= 20
    result = sweep(list(SEARCH_MULTIPLIERS), strategy="search", costs=costs, budget=1.0,
                   limit=200, store=tmp_path / "s.sqlite", client=client, progress=False)
    best = result.best
    assert best is not None
    # checked with the serial evaluator: the assignment really is within 1 point
    want = serial({"x": "exact"}, layers=best["assignment"], limit=200)
    assert want[-1].top1 == best["top1"]
    assert want[1].top1 - want[-1].top1 <= 1.0
    assert best["cost"] < 0.5  # far cheaper than exact everywhere (1.0)
    result.write_layer_map(tmp_path / "best.json")
    proc = approxmul("evaluate", "--layers", "best.json", "--limit", "200", "-m", "exact",
                     "--csv", "e.csv", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert float(read_csv(tmp_path / "e.csv")[-1]["top1"]) == best["top1"]


def test_search_is_within_5_percent_of_exhaustive(client, tmp_path):
    names = ["exact", "truncated:bits=8,cut=6", "truncated:bits=8,cut=8", "drum:k=3",
             "drum:k=4", "mitchell"]
    layers = ["conv1", "conv2", "fc1"]
    costs = {n: {"power": SEARCH_MULTIPLIERS[n]} for n in names}
    common = dict(costs=costs, limit=150, search_layers=layers, client=client, progress=False,
                  store=tmp_path / "s.sqlite")
    every = sweep(names, strategy="exhaustive", **common)
    assert len(every.rows) == 6 ** 3 and all(r["status"] == "ok" for r in every.rows)
    reference = every.reference()
    fits = [r for r in every.rows if reference - r["top1"] <= 1.0]
    optimum = min(r["cost"] for r in fits)
    # the enumeration is not trivial: the cheapest assignment overall misses the budget
    assert min(r["cost"] for r in every.rows) < optimum
    found = sweep(names, strategy="search", budget=1.0, **common)
    assert found.best is not None and found.reference() == reference
    assert reference - found.best["top1"] <= 1.0
    assert found.best["cost"] <= 1.05 * optimum, (found.best, optimum)
    # every search evaluation was already in the store: the exhaustive run covered them
    assert found.submitted == 3 * 6  # only the sensitivity tasks were new


# ---------------------------------------------------------------------------
# Memory: 2,000+ tiny tasks stream to the store


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_client_memory_is_flat_over_2401_tasks(client, tmp_path):
    names = ["exact", "drum:k=3", "drum:k=4", "drum:k=5", "mitchell", "roba",
             "truncated:bits=8,cut=8"]
    samples = []

    def sample(key, record):
        samples.append(rss_mb())

    result = sweep(names, strategy="exhaustive", limit=1, store=tmp_path / "s.sqlite",
                   client=client, progress=False, on_record=sample)
    assert result.submitted == 7 ** 4 == len(samples)
    assert all(r["status"] == "ok" for r in result.rows)
    growth = max(samples[600:]) - samples[600]
    if not os.environ.get("APPROXMUL_SANITIZED"):  # ASan's quarantine grows RSS by design
        assert growth < 25, f"client RSS grew {growth:.1f} MB over the last 1,800 tasks"


# ---------------------------------------------------------------------------
# Bad input


def test_unreachable_scheduler_is_a_clear_error_within_the_timeout(tmp_path):
    start = time.monotonic()
    proc = approxmul("sweep", "-m", "drum:k=4", "--store", "s.sqlite", "--scheduler",
                     "tcp://127.0.0.1:9", "--connect-timeout", "3", cwd=tmp_path)
    assert time.monotonic() - start < 60
    assert_user_error(proc, "cannot reach the Dask scheduler at tcp://127.0.0.1:9", "3 s")
    assert not (tmp_path / "s.sqlite").exists()  # nothing written on error


def test_store_of_another_model_is_refused_unless_forced(client, tmp_path):
    store = tmp_path / "s.sqlite"
    sweep(["drum:k=4"], store=store, limit=20, client=client, progress=False)
    with pytest.raises(am.InvalidArgumentError, match="written for other inputs: data is"):
        sweep(["drum:k=4"], store=store, limit=30, client=client, progress=False)
    other = bundled_model()
    other.layers["fc2"].bias[0] += 1.0
    with pytest.raises(am.InvalidArgumentError, match="model is .* in the store"):
        sweep(["drum:k=4"], model=other, store=store, limit=20, client=client, progress=False)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE meta SET value = '0.0.1' WHERE name = 'approxmul'")
    proc = approxmul("sweep", "-m", "drum:k=4", "--store", "s.sqlite", "--limit", "20",
                     "--workers", "1", cwd=tmp_path)
    assert_user_error(proc, "approxmul is 0.0.1 in the store", "--force")
    forced = approxmul("sweep", "-m", "drum:k=4", "--store", "s.sqlite", "--limit", "20",
                       "--workers", "1", "--force", "--no-progress", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    # the task key holds the real library version, so the stored row is this run's
    assert "0 of 1 tasks to run (1 already in the store)" in forced.stderr
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT value FROM meta WHERE name = 'approxmul'").fetchone() == (
            am.__version__,)


def test_cost_csv_missing_multipliers_lists_them(tmp_path):
    write_costs(tmp_path / "c.csv", ["exact", "drum:k=4"], SEARCH_MULTIPLIERS)
    proc = approxmul("sweep", "-m", "exact", "-m", "drum:k=4", "-m", "drum:k=3", "-m",
                     "mitchell", "--strategy", "search", "--costs", "c.csv",
                     "--store", "s.sqlite", cwd=tmp_path)
    assert_user_error(proc, "lacks 2 multiplier(s): drum:k=3, mitchell")
    assert not (tmp_path / "s.sqlite").exists()  # refused before anything ran


@pytest.mark.parametrize("args, words", [
    (["--model", "net.onnx"], ["ONNX models are not supported yet"]),
    (["--strategy", "search"], ["needs multiplier costs"]),
    (["--search-layers", "conv9"], ["unknown layer(s) conv9"]),
    (["--tables", "nothing/*.bin"], ["matches no file"]),
    (["--vendor", "missing.so:mul*"], ["missing.so does not exist"]),
    (["--limit", "0"], ["--limit must be at least 1"]),
    (["--bits", "1"], ["--bits must be 2..16, got 1"]),
    (["--layer-map", "m.json"], ["use --strategy search"]),
    (["--plot", "p.png"], ["give --costs or --cost-sources"]),
    (["--strategy", "exhaustive", *sum((["-m", f"truncated:cut={c},correct={k}"]
                                        for c in range(16) for k in (0, 1)), [])],
     ["33 multipliers on 4 layers make 1,185,921 assignments"]),
])
def test_usage_errors(tmp_path, args, words):
    proc = approxmul("sweep", "-m", "drum:k=4", "--store", "s.sqlite", *args, cwd=tmp_path)
    assert_user_error(proc, *words)


@pytest.mark.parametrize("content, words", [
    (None, ["layer map m.json does not exist"]),
    ("{not json", ["layer map m.json is not JSON"]),
    ('{"conv1": 3}', ["expected an object of layer name -> multiplier spec strings"]),
    ('{"format": "other", "layers": {}}', ["expected an object of layer name"]),
    ('{"conv9": "drum:k=4"}', ["unknown layer name(s) 'conv9'"]),
])
def test_evaluate_rejects_bad_layer_maps(tmp_path, content, words):
    if content is not None:
        (tmp_path / "m.json").write_text(content)
    proc = approxmul("evaluate", "--layers", "m.json", "--limit", "10", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("approxmul evaluate: error:")
    for word in words:
        assert word in line, line
