"""A first look: build multipliers from tables, run approximate matmuls, compare.

    python -m approxmul_cffi.examples.quickstart

Builds the exact 8-bit unsigned multiplier and a few product-truncating
tables (the low partial-product columns removed), multiplies random
conv-sized matrices with each and prints how far each result is from the
exact one, and the throughput of each kernel.
"""

import time

import approxmul_cffi as am


def truncated_table(cut):
    """Products with partial-product bits a_i*b_j, i + j < cut, removed."""
    table = []
    for a in range(256):
        row = []
        for b in range(256):
            product = 0
            for i in range(8):
                for j in range(8):
                    if i + j >= cut and (a >> i) & 1 and (b >> j) & 1:
                        product += 1 << (i + j)
            row.append(product)
        table.append(row)
    return table


def main():
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (64, 576), dtype=np.uint8)
    b = rng.integers(0, 256, (576, 784), dtype=np.uint8)
    exact = am.Multiplier.exact(8)
    reference = am.matmul(a, b, exact).astype(np.int64)
    print(f"approxmul {am.__version__}  library {am.library_path()}")
    print(f"kernels: isa={am.info()['isa']} threads={am.get_num_threads()}\n")
    print(f"{'multiplier':<16}{'plan':<12}{'mean rel. error':>16}{'G products/s':>14}")
    for name, m in [("exact", exact)] + [
            (f"truncated cut={cut}", am.Multiplier.from_table(truncated_table(cut)))
            for cut in (4, 6, 8)]:
        start = time.perf_counter()
        result = am.matmul(a, b, m)
        seconds = time.perf_counter() - start
        error = np.abs(result - reference).mean() / np.abs(reference).mean()
        rate = a.shape[0] * a.shape[1] * b.shape[1] / seconds / 1e9
        print(f"{name:<16}{m.plan:<12}{error:>16.2e}{rate:>14.2f}")


if __name__ == "__main__":
    main()
