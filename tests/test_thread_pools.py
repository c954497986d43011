"""approxmul's thread pool beside others: threadpoolctl sees and limits it, counts take
effect in the kernels, approxmul_cffi.threads restores what it changes. No timings."""

import json
import textwrap

import pytest

import approxmul_cffi as am
from approxmul_cffi import threads

threadpoolctl = pytest.importorskip("threadpoolctl")  # the test extra installs it


def run_json(python_runner, code):
    result = python_runner(textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("first", ["approxmul_cffi", "threadpoolctl"])
def test_threadpool_info_lists_approxmul_whatever_the_import_order(python_runner, first):
    second = "threadpoolctl" if first == "approxmul_cffi" else "approxmul_cffi"
    pools = run_json(python_runner, f"""
        import json, {first}, {second}
        import approxmul_cffi as am, threadpoolctl
        am.set_num_threads(3)
        print(json.dumps(threadpoolctl.threadpool_info()))
    """)
    mine = [p for p in pools if p["user_api"] == "approxmul"]
    assert len(mine) == 1
    assert mine[0]["num_threads"] == 3 and mine[0]["internal_api"] == "approxmul"
    assert mine[0]["filepath"].endswith(".so") and mine[0]["version"] == am.__version__


def test_threadpool_limits_restores_the_default_that_follows_openmp():
    am.set_num_threads(0)
    default = am.get_num_threads()
    with threadpoolctl.threadpool_limits(limits={"approxmul": default + 1}):
        assert am.get_num_threads() == default + 1
    assert am._lib.approxmul_get_num_threads_setting() == 0  # not a fixed count
    with threadpoolctl.threadpool_limits(1):
        assert am.get_num_threads() == 1
    assert am._lib.approxmul_get_num_threads_setting() == 0


def test_threadpool_limits_limits_and_restores_approxmul():
    am.set_num_threads(3)
    try:
        with threadpoolctl.threadpool_limits(1):
            assert am.get_num_threads() == 1
        assert am.get_num_threads() == 3
        with threadpoolctl.threadpool_limits(limits={"approxmul": 2}):
            assert am.get_num_threads() == 2
        with threadpoolctl.threadpool_limits(1, user_api="blas"):
            assert am.get_num_threads() == 3  # another API's limit leaves approxmul alone
        assert am.get_num_threads() == 3
    finally:
        am.set_num_threads(0)


COUNT_WORKERS = """
    import json, os, threading, numpy as np, approxmul_cffi as am
    from approxmul_cffi import threads

    def cpu_by_thread():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        return out

    rng = np.random.default_rng(0)
    m = am.Multiplier.from_table(rng.integers(0, 65536, (256, 256)))
    # below _interrupt.LONG_WORK: the calls run on this thread, not on a
    # helper thread that takes its team along when it ends
    a = rng.integers(0, 256, (64, 576)).astype(np.uint8)
    b = rng.integers(0, 256, (576, 256)).astype(np.uint8)
    me = threading.get_native_id()

    def threads_used(run):
        # threads other than the caller that ran during the call (any CPU time),
        # once the team of the call before has stopped spinning; five tries,
        # as a loaded machine can delay a team thread's accounting (or its
        # start, while the caller takes every chunk). A limit that is ignored
        # shows in every try.
        seen = set()
        for _ in range(5):
            assert threads.settle(timeout=5.0, window=0.02)
            before = cpu_by_thread()
            run()
            after = cpu_by_thread()
            seen.add(1 + sum(1 for t, ns in after.items() if t != me and ns > before.get(t, 0)))
        return sorted(seen)

    def call():
        for _ in range(3):
            am.matmul(a, b, m)

    counts = {}
    for n in (1, 2):
        am.set_num_threads(n)
        call()  # the team exists before counting
        counts[f"set {n}"] = threads_used(call)
    import threadpoolctl
    with threadpoolctl.threadpool_limits(1):
        counts["threadpool_limits(1)"] = threads_used(call)
    with threads.exclusive(1):
        counts["exclusive(1)"] = threads_used(call)
    print(json.dumps(counts))
"""


def test_thread_counts_take_effect_in_the_kernels(python_runner):
    if not am.info().get("openmp") == "yes":
        pytest.skip("a build without OpenMP runs every kernel on the calling thread")
    # no BLAS call in that process: only approxmul's threads can run
    counts = run_json(python_runner, COUNT_WORKERS)
    want = {"set 1": 1, "set 2": 2, "threadpool_limits(1)": 1, "exclusive(1)": 1}
    assert counts.keys() == want.keys()
    for situation, threads_seen in counts.items():
        assert want[situation] in threads_seen, (situation, threads_seen)
        assert max(threads_seen) <= want[situation], (situation, threads_seen)


def test_exclusive_limits_blas_and_restores_the_exact_setting():
    np = pytest.importorskip("numpy")
    np.ones((2, 2)) @ np.ones((2, 2))  # NumPy's BLAS is loaded
    blas_before = [p["num_threads"] for p in threadpoolctl.threadpool_info()
                   if p["user_api"] == "blas"]
    assert am.get_num_threads() >= 1
    for setting in (0, 3):
        am.set_num_threads(setting)
        with threads.exclusive(2) as n:
            assert n == 2 and am.get_num_threads() == 2
            inside = threadpoolctl.threadpool_info()
            assert all(p["num_threads"] == 1 for p in inside if p["user_api"] == "blas")
        assert am._lib.approxmul_get_num_threads_setting() == setting
    am.set_num_threads(0)
    after = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert after == blas_before


def test_exclusive_limit_openmp_keeps_approxmul_count():
    with threads.exclusive(2, limit=("openmp", "blas")):
        assert am.get_num_threads() == 2
        assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info()
                   if p["user_api"] == "openmp")


def test_exclusive_restores_after_an_error():
    am.set_num_threads(0)
    with pytest.raises(RuntimeError):
        with threads.exclusive(1, settle_first=False):
            raise RuntimeError("inside")
    assert am._lib.approxmul_get_num_threads_setting() == 0


def test_settle_waits_for_a_busy_thread_then_gives_up():
    import threading
    import time

    stop = threading.Event()

    def spin():  # a thread that keeps burning CPU, as an unparked pool does
        while not stop.is_set():
            sum(range(1000))

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        time.sleep(0.05)
        start = time.perf_counter()
        assert threads.settle(timeout=0.3, window=0.05, busy=0.01) is False
        assert time.perf_counter() - start >= 0.3
    finally:
        stop.set()
        worker.join()
    assert threads.settle(timeout=5.0, window=0.05) is True


RELEASE = """
    import json, os, numpy as np, approxmul_cffi as am
    from approxmul_cffi import threads

    def tasks():
        return set(os.listdir("/proc/self/task"))

    rng = np.random.default_rng(1)
    m = am.Multiplier.exact(8)
    # below _interrupt.LONG_WORK, so the call runs on this thread and its
    # team stays after it (a long call's helper thread takes its team along)
    a = rng.integers(0, 256, (64, 576)).astype(np.uint8)
    b = rng.integers(0, 256, (576, 256)).astype(np.uint8)
    want = a.astype(np.int64) @ b.astype(np.int64)  # NumPy's integer matmul: no BLAS threads
    am.set_num_threads(2)
    before = tasks()
    first = am.matmul(a, b, m)
    team = tasks() - before
    threads.release()
    left = team & tasks()
    second = am.matmul(a, b, m)
    restarted = tasks() - before
    libgomp = any("libgomp" in line for line in open("/proc/self/maps"))
    print(json.dumps({"team": len(team), "left": len(left), "restarted": len(restarted),
                      "same": bool((first == want).all() and (second == want).all()),
                      "libgomp": libgomp}))
"""


def test_release_ends_the_team_and_the_next_call_restarts_it(python_runner):
    if not am.info().get("openmp") == "yes":
        pytest.skip("a build without OpenMP has no team to end")
    facts = run_json(python_runner, RELEASE)
    if not facts.pop("libgomp"):  # LLVM's libomp keeps its paused threads, asleep
        pytest.skip("only libgomp ends its threads on a pause (clang builds use libomp)")
    assert facts == {"team": 1, "left": 0, "restarted": 1, "same": True}
