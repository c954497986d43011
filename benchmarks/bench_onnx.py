"""Imported model structures: approxmul vs ONNX Runtime, float and integer, in one run.

    python benchmarks/bench_onnx.py [--model resnet50|shufflenet] [--threads 2]
                                    [--batches 1 8] [--repeat 3] [--json FILE]

The model is onnx's structural ResNet-50 or ShuffleNet (onnx/backend/test/data/light; its
ConstantOfShape weights are folded by ONNX Runtime's basic optimizer into
initializers first), quantized with onnxruntime.quantization.quantize_static
(QOperator: Conv/Gemm/MatMul; int8 weights) on its dummy input for ONNX
Runtime's integer session; approxmul's integer inference quantizes the
imported float model itself (calibrated on the same input): the same
convolutions, all integer. Per batch size, best of ``--repeat`` forwards:
approxmul float (NumPy), approxmul integer with the exact multiplier and
with a random 8x8 table (no exact shortcut), ONNX Runtime float and
integer, all with the same thread count. Prints ms per
forward and ratios; ``--quick`` shrinks it to a smoke run.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["resnet50", "shufflenet"], default="resnet50")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="batch 1, one pass (smoke test)")
    p.add_argument("--json", help="also write the results to this JSON file")
    return p.parse_args(argv)


args = parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
if args.quick:
    args.batches, args.repeat = [1], 1

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnxruntime import quantization  # noqa: E402

import approxmul_cffi as am  # noqa: E402
from approxmul_cffi import nn  # noqa: E402
from approxmul_cffi.onnx import load_onnx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                     f"light_{args.model}.onnx")


def session(path, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, save=None):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    so.graph_optimization_level = level
    if save:
        so.optimized_model_filepath = save
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def best_ms(fn, repeat):
    fn()  # warm-up: weight preparation, thread pools
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main():
    am.set_num_threads(args.threads)
    folder = tempfile.mkdtemp(prefix="bench_onnx_")
    folded = os.path.join(folder, f"{args.model}_folded.onnx")
    session(LIGHT, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC, save=folded)
    saved = onnx.load(folded)
    saved.ir_version = max(saved.ir_version, 7)  # IR 3 wants initializers listed as inputs
    read = {name for node in saved.graph.node for name in node.input}
    kept = [i for i in saved.graph.input if i.name in read]  # folding left unread inputs
    del saved.graph.input[:]
    saved.graph.input.extend(kept)
    feed = next(i.name for i in kept if i.name not in {t.name for t in saved.graph.initializer})
    for value in [*saved.graph.input, *saved.graph.output]:  # batch 1 in the file: a variable
        if value.name == feed or value.name in {o.name for o in saved.graph.output}:
            value.type.tensor_type.shape.dim[0].dim_param = "N"
    del saved.graph.value_info[:]
    inits = {t.name: t for t in saved.graph.initializer}
    for node in saved.graph.node:  # Reshape to (1, -1): keep dimension 0 instead (0)
        if node.op_type == "Reshape" and node.input[1] in inits:
            target = onnx.numpy_helper.to_array(inits[node.input[1]]).copy()
            target[0] = 0
            inits[node.input[1]].CopyFrom(onnx.numpy_helper.from_array(target, node.input[1]))
    onnx.save(saved, folded)
    float_model = load_onnx(folded)
    shape = (1, *float_model.input_shape)
    x1 = (np.arange(np.prod(shape)).reshape(shape) / np.prod(shape)).astype(np.float32)

    class Data(quantization.CalibrationDataReader):
        def __init__(self):
            self.items = iter([{feed: x1}])

        def get_next(self):
            return next(self.items, None)

    quantized_path = os.path.join(folder, f"{args.model}_int8.onnx")
    quantization.quantize_static(folded, quantized_path, Data(),
                                 quant_format=quantization.QuantFormat.QOperator,
                                 # the multiplier ops; pooling and softmax stay float
                                 # (QLinearAveragePool/QLinearSoftmax are not imported)
                                 op_types_to_quantize=["Conv", "Gemm", "MatMul"])
    # approxmul's integer path on the imported float model, calibrated on the same input
    # (ONNX Runtime's partly quantized graph keeps float Relu/pooling segments, which the
    # quantized import does not take)
    qmodel = nn.quantize(float_model, x1)
    table = am.Multiplier.from_table(np.random.default_rng(0).integers(0, 1 << 16, (256, 256)))
    exact = qmodel.assign("exact")
    tabled = qmodel.assign(table)
    ort_float, ort_int = session(folded), session(quantized_path)
    rows = []
    for batch in args.batches:
        x = np.repeat(x1, batch, axis=0)
        figures = {
            "approxmul float (NumPy)": best_ms(lambda: float_model.forward(x), args.repeat),
            "approxmul integer, exact": best_ms(lambda: qmodel.run_codes(x, exact), args.repeat),
            "approxmul integer, 8x8 table": best_ms(lambda: qmodel.run_codes(x, tabled),
                                                    args.repeat),
            "onnxruntime float": best_ms(lambda: ort_float.run(None, {feed: x}), args.repeat),
            "onnxruntime integer": best_ms(lambda: ort_int.run(None, {feed: x}), args.repeat),
        }
        print(f"batch {batch}:")
        base = figures["onnxruntime integer"]
        for what, ms in figures.items():
            print(f"  {what:32s} {ms:9.1f} ms/forward  {ms / base:7.2f}x onnxruntime integer")
            rows.append({"batch": batch, "what": what, "ms": ms})
    machine = {"model": args.model,
               "cpu": platform.processor() or platform.machine(), "threads": args.threads,
               "cores": os.cpu_count(), "python": sys.version.split()[0],
               "onnxruntime": ort.__version__, "onnx": onnx.__version__,
               "approxmul_isa": am.info().get("isa", "")}
    try:
        with open("/proc/cpuinfo") as f:
            machine["cpu"] = next(line.split(":", 1)[1].strip() for line in f
                                  if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print("machine:", json.dumps(machine))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
