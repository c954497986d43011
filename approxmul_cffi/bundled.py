"""The models that ship with the package, by the names every subcommand takes.

``approxmul evaluate --model NAME``, ``retrain``, ``sweep`` and ``layers``
accept these names (and the model files' stems as aliases); each model
comes with the data set it was trained on (:mod:`approxmul_cffi.datasets`).
"""

import os

from . import nn

BUNDLED_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "digits_lenet.json")
# name -> (model file in models/, datasets.load name); `--model NAME` in the CLI
BUNDLED_MODELS = {"digits-lenet": ("digits_lenet.json", "digits"),
                  "mnist-lenet5": ("mnist_lenet5.json", "mnist")}
# the model files' stems, which `approxmul sweep` took before: aliases of the names above
BUNDLED_ALIASES = {"digits_lenet": "digits-lenet", "mnist_lenet5": "mnist-lenet5"}


def bundled_name(name):
    """The bundled model ``name`` stands for (a key of BUNDLED_MODELS), or None.

    The model files' stems (``digits_lenet``, ``mnist_lenet5``, which
    ``approxmul sweep`` took) are aliases of the hyphenated names.

    >>> bundled_name("mnist-lenet5"), bundled_name("digits_lenet"), bundled_name("mine.json")
    ('mnist-lenet5', 'digits-lenet', None)
    """
    if not isinstance(name, str):
        return None
    name = BUNDLED_ALIASES.get(name, name)
    return name if name in BUNDLED_MODELS else None


def model_file(name):
    """The file a command line's MODEL names: a bundled model's (:func:`bundled_name`), else
    ``name`` itself, which must exist (or ``name.json``); else a ModelError naming the bundled.

    >>> os.path.basename(model_file("mnist-lenet5"))
    'mnist_lenet5.json'
    >>> model_file("missing.json")
    Traceback (most recent call last):
    ...
    approxmul_cffi.errors.ModelError: model file not found: missing.json (bundled models: digits-lenet, mnist-lenet5)
    """
    bundled = bundled_name(name)
    if bundled is not None:
        return os.path.join(os.path.dirname(BUNDLED_MODEL), BUNDLED_MODELS[bundled][0])
    path = os.fspath(name)
    if not os.path.exists(path) and (path.endswith(".json") or not os.path.exists(path + ".json")):
        raise nn.ModelError(f"model file not found: {path} (bundled models: "
                            f"{', '.join(BUNDLED_MODELS)})")
    return path


def bundled_model(name="digits-lenet"):
    """A float model that ships with the package: by default the digits LeNet (BUNDLED_MODELS;
    the underscore aliases of :func:`bundled_name` work too)."""
    if bundled_name(name) is None:
        raise nn.ModelError(f"unknown bundled model {name!r}; use one of {', '.join(BUNDLED_MODELS)}")
    return nn.Model.load(model_file(name))
