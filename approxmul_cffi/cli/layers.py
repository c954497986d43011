"""``approxmul layers [MODEL]``: the layers of a model, their shapes and multiplications.

One row per layer: name, op, inputs, output shape (one sample), parameter
count and multiply-accumulates per sample; the multiply-accumulates of
Conv2d and Linear layers (dynamically quantized ones too) are those an approximate multiplier computes.
MODEL is a bundled model (digits-lenet, mnist-lenet5, as in ``approxmul
evaluate --model``), a model JSON written by nn.Model.save or an ONNX file
(default: the bundled digits LeNet). Needs NumPy (and onnx for ONNX files).
"""

import json
import math
import sys

HELP = "list a model's layers, shapes and multiply-accumulates"


def add_parser(subparsers):
    from . import description

    parser = subparsers.add_parser("layers", help=HELP,
                                   description=description(sys.modules[__name__]))
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="a bundled model (digits-lenet, mnist-lenet5), a model JSON or an "
                             ".onnx file (default: digits-lenet)")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    return parser


def layer_rows(model):
    """Per node: name, op, inputs, output shape, parameters, multiply-accumulates per sample.

    A layer with a weight multiplies each output element by a weight slice
    of ``prod(weight.shape[1:])`` entries: C/groups*KH*KW for Conv2d, the
    input features for Linear.

    >>> from approxmul_cffi import nn
    >>> m = nn.Model((1, 8, 8), [("conv", nn.Conv2d(1, 4, 3)), ("flat", nn.Flatten()),
    ...                          ("fc", nn.Linear(144, 10))])
    >>> [(r["name"], r["output_shape"], r["macs"]) for r in layer_rows(m)]
    [('conv', [4, 6, 6], 1296), ('flat', [144], 0), ('fc', [10], 1440)]
    """
    from approxmul_cffi.nn import DynamicQuantized

    rows = []
    for node in model.nodes:
        # a dynamically quantized layer: its Conv2d/Linear's shapes and multiplications
        core = node.layer.layer if isinstance(node.layer, DynamicQuantized) else node.layer
        shapes = core.param_shapes()
        out_shape = [int(s) for s in model.shapes[node.name]]
        weight = shapes.get("weight")
        multiplies = type(core).__name__ in ("Conv2d", "Linear") and weight is not None
        rows.append({
            "name": node.name,
            "op": type(node.layer).__name__ + ("" if core is node.layer else
                                                f"({type(core).__name__})"),
            "inputs": list(node.inputs),
            "output_shape": out_shape,
            "parameters": sum(math.prod(s) for s in shapes.values()),
            "macs": math.prod(out_shape) * (math.prod(weight[1:]) if multiplies else
                                             model.shapes[node.inputs[0]][-1] if
                                             type(node.layer).__name__ == "MatMul" else 0),
        })
    return rows


def run(args):
    from approxmul_cffi.errors import ApproxmulError
    from approxmul_cffi.bundled import BUNDLED_MODEL, model_file
    from approxmul_cffi.onnx import load_model

    from . import UsageError

    try:
        model = load_model(model_file(args.model) if args.model else BUNDLED_MODEL)
    except ApproxmulError as error:
        raise UsageError(str(error)) from None
    rows = layer_rows(model)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ["layer", "op", "inputs", "output shape", "parameters", "MACs/sample"]
    cells = [[r["name"], r["op"], ",".join(r["inputs"]), "x".join(map(str, r["output_shape"])),
              f"{r['parameters']:,}", f"{r['macs']:,}"] for r in rows]
    cells.append(["total", "", "", "", f"{sum(r['parameters'] for r in rows):,}",
                  f"{sum(r['macs'] for r in rows):,}"])
    widths = [max(len(line[i]) for line in [header] + cells) for i in range(len(header))]
    for line in [header] + cells:
        print("  ".join(c.rjust(w) if i >= 4 else c.ljust(w)
                        for i, (c, w) in enumerate(zip(line, widths))).rstrip())
    return 0
