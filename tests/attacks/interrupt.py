"""Attack: Ctrl-C during a long C computation (it was ignored for 9-10 s)."""

import sys

from common import expect_ctrl_c_stops

for spec in ("drum:bits=16,k=8", "mitchell:bits=16"):
    expect_ctrl_c_stops([sys.executable, "-m", "approxmul_cffi.cli", "metrics", spec],
                        f"approxmul metrics {spec}", 130)
