"""Helpers of the portable tests (standard library only)."""

import array
import os


def matrix(typecode, rows, cols, values):
    """A rows x cols memoryview over array.array(typecode, values)."""
    data = array.array(typecode, values)
    assert len(data) == rows * cols
    return memoryview(data).cast("B").cast(typecode, shape=[rows, cols])


def reference_matmul(product, a, b):
    """sum_k product(a[i, k], b[k, j]) in plain Python integers."""
    rows, inner = a.shape
    cols = b.shape[1]
    return [[sum(product(a[i, k], b[k, j]) for k in range(inner)) for j in range(cols)]
            for i in range(rows)]


def sanitized():
    """The library under test was built with sanitizers (timing and RSS are distorted)."""
    return bool(os.environ.get("APPROXMUL_SANITIZED"))


class Lcg:
    """A tiny deterministic generator, identical on every interpreter."""

    def __init__(self, seed=12345):
        self.state = seed

    def __call__(self, low, high):
        """An integer in [low, high)."""
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % 2**64
        return low + (self.state >> 33) % (high - low)

    def values(self, n, low, high):
        return [self(low, high) for _ in range(n)]
