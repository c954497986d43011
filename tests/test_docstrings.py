"""The examples in public docstrings run and print what they show."""

import doctest
import importlib
import importlib.util
import inspect
import pkgutil
import shutil

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
def test_docstring_examples(name, tmp_path, monkeypatch):
    try:
        module = importlib.import_module(name)
    except ImportError as error:  # a module needing an optional extra that is absent
        pytest.skip(f"{name}: {error}")
    if name == "approxmul_cffi.multipliers" and not shutil.which("cc"):
        pytest.skip("from_c_function's example compiles a C model and needs a C compiler")
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    result = doctest.testmod(module, extraglobs={"am": approxmul_cffi},
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    # a module whose public functions and classes show no example would pass vacuously
    public = [value for key, value in vars(module).items() if not key.startswith("_")
              and (inspect.isfunction(value) or inspect.isclass(value))
              and value.__module__ == name]
    assert result.attempted > 0 or not public, f"{name}: no docstring example ran"
