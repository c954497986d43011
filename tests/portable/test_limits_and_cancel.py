"""Thread counts that would crash OpenMP are refused; long calls can be stopped.

A thread count is checked in C (every front end passes through
approxmul_set_num_threads), and OMP_NUM_THREADS is capped the same way.
approxmul_cancel stops calls in progress, not later ones; from Python,
Ctrl-C reaches a long call within a fraction of a second.
"""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

import approxmul_cffi as am
from approxmul_cffi._library import ffi, raw_lib

MAX = raw_lib.APPROXMUL_MAX_THREADS

# 4^16 products through a 16-bit model: seconds of work on any machine
SLOW_SPEC = "drum:bits=16,k=8"


@pytest.fixture
def restore_threads():
    before = am.get_num_threads()
    yield
    am.set_num_threads(0)
    assert am.get_num_threads() == before


@pytest.mark.parametrize("count", [MAX + 1, 40000, 65535, 99999, 2**31 - 1, -1])
def test_unreasonable_thread_counts_are_refused(count, restore_threads):
    before = am.get_num_threads()
    with pytest.raises(am.InvalidArgumentError, match=rf"num_threads: {count} "):
        am.set_num_threads(count)
    assert am.get_num_threads() == before  # the setting is unchanged


def test_the_limit_itself_is_accepted(restore_threads):
    am.set_num_threads(MAX)
    assert am.get_num_threads() == MAX
    am.set_num_threads(3)
    assert am.get_num_threads() == 3


def _run(code, env=None, **kwargs):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, cwd=tempfile.gettempdir(), timeout=120,
                          **kwargs)


def test_omp_num_threads_is_capped():
    code = "import approxmul_cffi as am; print(am.get_num_threads())"
    result = _run(code, env={"OMP_NUM_THREADS": "99999"})
    assert result.returncode == 0, result.stderr
    openmp = am.info()["openmp"] == "yes"
    assert int(result.stdout) == (MAX if openmp else 1)


def _slow_metrics_in_thread():
    m = am.multiplier(SLOW_SPEC)
    outcome = {}

    def call():  # the raw C call, as a C caller would make it
        out = ffi.new("approxmul_metrics *")
        outcome["status"] = raw_lib.approxmul_multiplier_metrics(m.handle, out)
        outcome["message"] = ffi.string(raw_lib.approxmul_last_error()).decode()

    worker = threading.Thread(target=call)
    worker.start()
    return worker, outcome


def test_cancel_stops_a_call_in_progress():
    worker, outcome = _slow_metrics_in_thread()
    time.sleep(0.3)
    raw_lib.approxmul_cancel()
    worker.join(30)
    assert not worker.is_alive()
    assert outcome["status"] == raw_lib.APPROXMUL_ERR_CANCELLED
    assert "cancelled" in outcome["message"]
    # later calls are unaffected
    assert am.multiplier("drum:bits=12,k=6").metrics()["pairs"] == 4**12


def test_cancel_before_a_call_does_not_stop_it():
    raw_lib.approxmul_cancel()
    assert am.multiplier("drum:bits=12,k=6").metrics()["pairs"] == 4**12


def test_cancelled_status_maps_to_its_exception():
    error = am._library.error_for(raw_lib.APPROXMUL_ERR_CANCELLED, "cancelled")
    assert isinstance(error, am.errors.CancelledError)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT delivery is POSIX")
@pytest.mark.parametrize("call", [
    "am.multiplier('%s').metrics()" % SLOW_SPEC,
    "am.multiplier('%s').error_map()" % "drum:bits=12,k=4",
])
def test_ctrl_c_interrupts_a_long_call(call):
    # the CLI user's case: Ctrl-C in the main thread during a long C call
    code = f"""
        import sys, approxmul_cffi as am
        print("ready", flush=True)
        try:
            for _ in range(1000):
                {call}
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(7)
    """
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=tempfile.gettempdir())
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # well inside the C call
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        waited = time.monotonic() - sent
    finally:
        process.kill()
    assert process.returncode == 7, err
    assert out.strip() == "interrupted"
    # a functional bound, not a timing benchmark: uninterrupted, this call
    # runs for seconds; cancelled, it stops at the next row
    assert waited < 3.0, waited
