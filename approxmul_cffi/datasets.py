"""Evaluation data: scikit-learn's handwritten digits with a fixed split.

The 1,797 8x8 images (pixel values 0..16) become float32 NCHW arrays in
[0, 1]; a seeded permutation holds out 450 of them. The training script of the
bundled model (scripts/train_digits.py) uses the same split.

Example:
    >>> from approxmul_cffi.datasets import load_digits
    >>> x, y = load_digits("test")
    >>> x.shape, x.dtype.name, y.shape
    ((450, 1, 8, 8), 'float32', (450,))
"""

import numpy as np

HELD_OUT = 450
SEED = 0


def load_digits(split="test"):
    """(images, labels) of the ``"train"``, ``"test"`` (held-out) or ``"all"`` split."""
    if split not in ("train", "test", "all"):
        raise ValueError(f"unknown split {split!r}; use 'train', 'test' or 'all'")
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        raise ImportError(
            "the digits data comes from scikit-learn: pip install 'approxmul[evaluate]'"
        ) from None
    data = sk_load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    y = data.target.astype(np.int64)
    if split == "all":
        return x, y
    order = np.random.default_rng(SEED).permutation(len(y))
    idx = order[:HELD_OUT] if split == "test" else order[HELD_OUT:]
    return x[idx], y[idx]
