"""Attack: Ctrl-C during a long C computation (it was ignored for 9-10 s)."""

import os
import signal
import subprocess
import sys
import tempfile
import time

for args in (["metrics", "drum:bits=16,k=8"], ["metrics", "mitchell:bits=16"]):
    child = subprocess.Popen([sys.executable, "-m", "approxmul_cffi.cli", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tempfile.gettempdir(), env=dict(os.environ))
    time.sleep(2.0)  # imports done, deep inside the 4^16-pair scan
    if child.poll() is not None:
        sys.exit(f"FAIL: {args} finished before the interrupt; pick a longer computation")
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        child.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        sys.exit(f"FAIL: {args} ignored Ctrl-C for 10 s")
    waited = time.monotonic() - sent
    if child.returncode != 130 or waited > 2.0:
        sys.exit(f"FAIL: {args}: exit {child.returncode} after {waited:.2f} s (want 130, < 2 s)")
    print(f"ok: {args} stopped {waited:.2f} s after Ctrl-C")
