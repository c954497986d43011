"""The examples in public docstrings run and print what they show."""

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import approxmul_cffi


def public_modules():
    names = ["approxmul_cffi"]
    for info in pkgutil.walk_packages(approxmul_cffi.__path__, "approxmul_cffi."):
        leaf = info.name.rsplit(".", 1)[-1]
        # the packaged libapproxmul.so looks like an extension module to pkgutil
        is_python = importlib.util.find_spec(info.name).origin.endswith(".py")
        if is_python and not leaf.startswith("_"):
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", public_modules())
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as error:  # a module needing an optional extra that is absent
        pytest.skip(f"{name}: {error}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
