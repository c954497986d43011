"""Retraining the digits LeNet through drum:k=3: the Keras adapter beside the PyTorch adapter.

    python benchmarks/bench_keras_retrain.py [--multiplier drum:k=3] [--epochs 10] [--lr 5e-3]
        [--batch-size 64] [--seed 0] [--gradient ste] [--out FILE.json]

Both start from the bundled weights (unsigned uint8 codes, the evaluator's
default scheme) with the same settings: Adam, cosine decay of the learning
rate to 0 over all steps, batches shuffled per epoch, recalibration after
each epoch, test accuracy per epoch. Torch runs
``approxmul_cffi.torch.training.retrain``; Keras ``approximate`` +
``model.fit`` + ``recalibrate`` (graph mode). The shuffles and
initializations differ between frameworks, so single-seed figures differ
by the run-to-run spread (docs/retraining.md).
"""

import argparse
import json
import time


def keras_run(args, train, test):
    import keras
    from approxmul_cffi.keras import approximate, recalibrate
    from approxmul_cffi.keras.models import digits_lenet
    keras.utils.set_random_seed(args.seed)
    x, y = train[0].transpose(0, 2, 3, 1), train[1]
    xt, yt = test[0].transpose(0, 2, 3, 1), test[1]
    model = approximate(digits_lenet(), args.multiplier, calibration=[x], gradient=args.gradient)
    steps = args.epochs * -(-len(x) // args.batch_size)
    lr = keras.optimizers.schedules.CosineDecay(args.lr, steps)
    model.compile(keras.optimizers.Adam(lr), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    acc = lambda: float(model.evaluate(xt, yt, batch_size=256, verbose=0)[1] * 100)  # noqa: E731
    before, history, start = acc(), [], time.perf_counter()
    for _ in range(args.epochs):
        model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=True, verbose=0)
        recalibrate(model, [x])
        history.append(acc())
    return dict(framework="keras", before=before, epochs=history, after=history[-1],
                seconds=time.perf_counter() - start)


def torch_run(args, train, test):
    from approxmul_cffi.evaluation import bundled_model
    from approxmul_cffi.torch.graph import to_torch
    from approxmul_cffi.torch.training import retrain
    start = time.perf_counter()
    r = retrain(to_torch(bundled_model()), args.multiplier, train, test, epochs=args.epochs,
                gradient=args.gradient, lr=args.lr, batch_size=args.batch_size, seed=args.seed,
                progress=False, bias_correction=False)   # the Keras adapter has none
    return dict(framework="torch", before=r["before"], epochs=r["epochs"], after=r["after"],
                seconds=time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--multiplier", default="drum:k=3")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gradient", default="ste", choices=("ste", "table"))
    p.add_argument("--frameworks", nargs="+", default=["torch", "keras"])
    p.add_argument("--out")
    args = p.parse_args()
    from approxmul_cffi.datasets import load_digits
    train, test = load_digits("train"), load_digits("test")
    results = []
    for name in args.frameworks:
        r = (torch_run if name == "torch" else keras_run)(args, train, test)
        r.update(multiplier=args.multiplier, gradient=args.gradient, seed=args.seed, lr=args.lr,
                 batch_size=args.batch_size)
        results.append(r)
        print(f"{name:6s} before {r['before']:.2f} % best {max(r['epochs']):.2f} % "
              f"final {r['after']:.2f} % ({r['seconds']:.0f} s): "
              + " ".join(f"{a:.1f}" for a in r["epochs"]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
