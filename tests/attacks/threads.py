"""Attack: absurd thread counts (they crashed requantization or made libgomp exit)."""

from common import approxmul, expect_success, expect_usage_error, python

for count in ("99999", "65535", "40000", "1025"):
    expect_usage_error(approxmul("evaluate", "--threads", count, "--limit", "5",
                                 "--no-progress"), "--threads", count)
expect_success(python("""
import approxmul_cffi as am
for count in (65535, 99999, 2**31 - 1):
    try:
        am.set_num_threads(count)
    except am.InvalidArgumentError as error:
        assert "1024" in str(error), error
    else:
        raise SystemExit(f"set_num_threads({count}) was accepted")
"""), "set_num_threads refuses counts above 1024")
# OMP_NUM_THREADS asking for too many is capped, and a full evaluation still runs
expect_success(approxmul("evaluate", "--limit", "20", "--no-progress", "-m", "drum:k=4",
                         env={"OMP_NUM_THREADS": "99999"}, timeout=600),
               "OMP_NUM_THREADS=99999 is capped")
