"""``approxmul show SPEC --out FILE.png``: error heatmap and error histogram.

The heatmap's axes are operand values (signed operands from -2^(n-1) up),
colour the error approx - exact; needs matplotlib (``pip install
approxmul[plot]``) and NumPy. At most 12-bit operands.
"""


def add_parser(subparsers):
    parser = subparsers.add_parser("show", help="draw a multiplier's error map and histogram",
                                   description=__doc__.split("\n\n", 1)[1])
    parser.add_argument("spec", metavar="SPEC", help="multiplier spec or table path")
    parser.add_argument("--out", required=True, metavar="FILE",
                        help="image to write (.png, .pdf, .svg)")
    return parser


def run(args):
    """Draw the error map and histogram into ``--out``.

    >>> from approxmul_cffi.cli import main
    >>> main(["show", "drum:k=4", "--out", "drum.png"])
    wrote drum.png
    0
    >>> open("drum.png", "rb").read(4)
    b'\\x89PNG'
    """
    from . import UsageError

    try:
        import matplotlib
        import numpy as np
    except ImportError as error:
        raise UsageError(f"'show' needs matplotlib and NumPy ({error.name} is missing): "
                         "pip install 'approxmul[plot]'") from None
    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    import approxmul_cffi as am

    m = am.multiplier(args.spec)
    errors = np.asarray(m.error_map())
    low, high = m.operand_range
    if m.signed:  # raw pattern order -> value order for the picture
        errors = np.roll(np.roll(errors, errors.shape[0] // 2, axis=0), errors.shape[1] // 2, axis=1)
    metrics = m.metrics()
    figure, (heat, hist) = plt.subplots(1, 2, figsize=(11, 4.5))
    limit = max(1, int(np.abs(errors).max()))
    image = heat.imshow(errors, origin="lower", cmap="RdBu_r", vmin=-limit, vmax=limit,
                        extent=(low - 0.5, high + 0.5, low - 0.5, high + 0.5),
                        interpolation="nearest")
    heat.set_xlabel("b")
    heat.set_ylabel("a")
    heat.set_title("error approx - exact")
    figure.colorbar(image, ax=heat)
    hist.hist(errors.ravel(), bins=min(101, 2 * limit + 1), color="tab:blue")
    hist.set_yscale("log")
    hist.set_xlabel("error")
    hist.set_ylabel("operand pairs")
    hist.set_title(f"MAE {metrics['mae']:.4g}  WCE {metrics['wce']}  EP {metrics['ep_percent']:.3g}%")
    figure.suptitle(m.spec or args.spec)
    figure.tight_layout()
    try:
        figure.savefig(args.out)
    finally:
        plt.close(figure)
    print(f"wrote {args.out}")
    return 0
