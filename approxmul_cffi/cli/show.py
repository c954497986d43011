"""``approxmul show SPEC --out FILE.png``: error heatmap and error histogram.

The heatmap's axes are operand values (signed operands from -2^(n-1) up),
colour the error approx - exact. Above 256 x 256 operand pairs each cell
shows the largest error (in magnitude) of its block of pairs, so errors
that live in the low bits stay visible instead of aliasing into patterns.
Needs matplotlib (``pip install approxmul[plot]``) and NumPy. At most
12-bit operands (16 million pairs).
"""

import os
import sys

MAX_BITS = 12  # 2^24 int64 errors = 128 MiB; 16 bits would be 32 GiB
PIXELS = 256   # heatmap cells per side at most (each about 2 pixels at 150 dpi)


def add_parser(subparsers):
    from . import add_table_options, description

    parser = subparsers.add_parser("show", help="draw a multiplier's error map and histogram",
                                   description=description(sys.modules[__name__]))
    parser.add_argument("spec", metavar="SPEC", help="multiplier spec, table path or netlist (.v)")
    parser.add_argument("--out", required=True, metavar="FILE",
                        help="image to write (.png, .pdf, .svg, ...: what matplotlib writes)")
    add_table_options(parser)
    return parser


def block_extremes(errors, block):
    """Each block x block tile of a square array reduced to its entry of largest magnitude.

    Ties keep the first entry in row-major order within the tile, so the
    result is the signed error, not its absolute value.

    >>> import numpy as np
    >>> e = np.array([[0, -3, 1, 1], [2, 0, 0, 0], [0, 0, 5, 0], [0, 0, 0, -5]])
    >>> block_extremes(e, 2).tolist()
    [[-3, 1], [0, 5]]
    """
    import numpy as np

    side = errors.shape[0] // block
    tiles = errors.reshape(side, block, side, block).transpose(0, 2, 1, 3).reshape(side, side, -1)
    pick = np.abs(tiles).argmax(axis=2)
    return np.take_along_axis(tiles, pick[..., None], axis=2)[..., 0]


def run(args):
    """Draw the error map and histogram into ``--out``.

    >>> from approxmul_cffi.cli import main
    >>> main(["show", "drum:k=4", "--out", "drum.png"])
    wrote drum.png
    0
    >>> open("drum.png", "rb").read(4)
    b'\\x89PNG'
    """
    from . import UsageError, load_multiplier

    try:
        import matplotlib
        import numpy as np
    except ImportError as error:
        raise UsageError(f"'show' needs matplotlib and NumPy ({error.name} is missing): "
                         "pip install 'approxmul[plot]'") from None
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    extension = os.path.splitext(args.out)[1].lower().lstrip(".")
    formats = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    if extension not in formats:
        raise UsageError(f"--out {args.out}: cannot tell the image format from "
                         f"{'.' + extension if extension else 'a missing extension'}; "
                         f"use one of {', '.join('.' + f for f in sorted(formats))}")
    m, _ = load_multiplier(args.spec, args)
    if m.bits > MAX_BITS:
        raise UsageError(f"{args.spec}: {m.bits}-bit operands are {4 ** m.bits:,} pairs; "
                         f"'show' draws at most {MAX_BITS}-bit multipliers ('approxmul metrics' "
                         f"measures any width)")
    errors = np.asarray(m.error_map())
    low, high = m.operand_range
    if m.signed:  # raw pattern order -> value order for the picture
        errors = np.roll(np.roll(errors, errors.shape[0] // 2, axis=0), errors.shape[1] // 2, axis=1)
    metrics = m.metrics()
    side = errors.shape[0]
    block = max(1, side // PIXELS)
    shown = block_extremes(errors, block) if block > 1 else errors
    figure, (heat, hist) = plt.subplots(1, 2, figsize=(11, 4.5))
    limit = max(1, int(np.abs(errors).max()))
    image = heat.imshow(shown, origin="lower", cmap="RdBu_r", vmin=-limit, vmax=limit,
                        extent=(low - 0.5, high + 0.5, low - 0.5, high + 0.5),
                        interpolation="nearest")
    heat.set_xlabel("b")
    heat.set_ylabel("a")
    heat.set_title("error approx - exact" + (f" (largest |error| per {block}x{block} block)"
                                             if block > 1 else ""), fontsize=10)
    figure.colorbar(image, ax=heat)
    hist.hist(errors.ravel(), bins=min(101, 2 * limit + 1), color="tab:blue")
    hist.set_yscale("log")
    hist.set_xlabel("error")
    hist.set_ylabel("operand pairs")
    hist.set_title(f"MAE {metrics['mae']:.4g}  WCE {metrics['wce']}  EP {metrics['ep_percent']:.3g}%")
    figure.suptitle(m.spec or args.spec)
    figure.tight_layout()
    try:
        figure.savefig(args.out, dpi=150)
    finally:
        plt.close(figure)
    print(f"wrote {args.out}")
    return 0
