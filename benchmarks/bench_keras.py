"""Forward speed of Keras approximate layers against the float Keras layers, ResNet-20 shapes.

    python benchmarks/bench_keras.py [--batch 64] [--repeats 20] [--multiplier drum:k=4] [--quick]

Each layer (3x3, padding "same": 3->16 and 16->16 at 32x32, 32->32 at
16x16, 64->64 at 8x8) runs as a one-layer Keras model inside a
tf.function: the float model, the approximated model, and the bare
crossing into NumPy (tf.numpy_function taking the layer's operands, input,
kernel and bias, and returning what the approximate layer returns,
preallocated: its float32 output and the input codes, both in 64-byte aligned
buffers that TensorFlow adopts without a copy: what the layer pays besides
its integer work). Each engine is timed in its own block after a 0.3 s pause (thread
pools left spinning by the previous engine slow the next, see
/work/shared/notes/frameworks.md); the median per call is printed with
the ratios approx/float and crossing/approx.
"""

import argparse
import statistics
import time

import numpy as np

SHAPES = [(3, 16, 32), (16, 16, 32), (32, 32, 16), (64, 64, 8)]


def timed(fn, repeats):
    fn()
    fn()  # warm: tracing, first quantization of the weights
    time.sleep(0.3)
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--multiplier", default="drum:k=4")
    p.add_argument("--quick", action="store_true", help="batch 4, 2 repeats (smoke test)")
    args = p.parse_args()
    if args.quick:
        args.batch, args.repeats = 4, 2
    import keras
    import tensorflow as tf
    from approxmul_cffi.keras import approximate
    from approxmul_cffi.keras.layer import _adoptable  # the adapter's own output buffers
    rng = np.random.default_rng(0)
    print(f"batch {args.batch}, multiplier {args.multiplier}, median of {args.repeats} calls (ms)")
    print(f"{'layer':>14s} {'float':>8s} {'approx':>8s} {'cross':>8s} {'approx/float':>12s} "
          f"{'cross/approx':>12s}")
    for cin, cout, hw in SHAPES:
        x = tf.constant(rng.standard_normal((args.batch, hw, hw, cin)).astype(np.float32))
        net = keras.Sequential([keras.Input((hw, hw, cin)),
                                keras.layers.Conv2D(cout, 3, padding="same", name="conv")])
        approx = approximate(net, args.multiplier, calibration=[x.numpy()], gradient="none")
        out = _adoptable((args.batch, hw, hw, cout), np.float32)
        out[...] = 0
        codes = _adoptable(x.shape, np.uint8)
        codes[...] = 0
        f_float = tf.function(lambda: net(x, training=False))
        f_approx = tf.function(lambda: approx(x, training=False))
        layer = approx.get_layer("conv")  # the crossing takes the layer's operands
        kernel, bias = tf.convert_to_tensor(layer.kernel), tf.convert_to_tensor(layer.bias)
        f_cross = tf.function(lambda: tf.numpy_function(lambda *a: (out, codes), [x, kernel, bias],
                                                        [tf.float32, tf.uint8]))
        t_float = timed(f_float, args.repeats)
        t_approx = timed(f_approx, args.repeats)
        t_cross = timed(f_cross, args.repeats)
        name = f"{cin}->{cout}@{hw}"
        print(f"{name:>14s} {t_float * 1e3:8.2f} {t_approx * 1e3:8.2f} {t_cross * 1e3:8.3f} "
              f"{t_approx / t_float:12.1f} {t_cross / t_approx:11.1%}", flush=True)


if __name__ == "__main__":
    main()
