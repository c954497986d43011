"""Helpers of the attack scripts: run a command, check that it failed cleanly."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def approxmul(*args, env=None, timeout=120):
    """The approxmul CLI in a child interpreter, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "approxmul_cffi.cli", *args],
                          capture_output=True, text=True, timeout=timeout,
                          cwd=tempfile.gettempdir(), env=dict(os.environ, **(env or {})))


def python(code, env=None, timeout=120):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, cwd=tempfile.gettempdir(),
                          env=dict(os.environ, **(env or {})))


def expect_usage_error(result, *words):
    """Exit status 2 and one line on stderr containing every word; else exit 1 with why."""
    lines = result.stderr.strip().splitlines()
    ok = (result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr
          and all(word in lines[0] for word in words))
    if not ok:
        sys.exit(f"FAIL: expected a one-line error with {words}, got exit "
                 f"{result.returncode}:\n{result.stderr[-3000:]}")
    print("ok:", lines[0])


def expect_success(result, what):
    if result.returncode != 0:
        sys.exit(f"FAIL: {what}: exit {result.returncode}\n{result.stderr[-3000:]}")
    print("ok:", what)


def expect_ctrl_c_stops(command, what, status, within=2.0, after=2.0):
    """Starts ``command``, sends SIGINT ``after`` s later; it must exit ``status`` within ``within`` s."""
    import signal
    import time

    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tempfile.gettempdir(), env=dict(os.environ))
    time.sleep(after)  # imports done, deep inside the long computation
    if child.poll() is not None:
        sys.exit(f"FAIL: {what} finished before the interrupt; pick a longer computation")
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        child.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        sys.exit(f"FAIL: {what} ignored Ctrl-C for 10 s")
    waited = time.monotonic() - sent
    if child.returncode != status or waited > within:
        sys.exit(f"FAIL: {what}: exit {child.returncode} after {waited:.2f} s "
                 f"(want {status}, < {within} s)")
    print(f"ok: {what} stopped {waited:.2f} s after Ctrl-C")
