"""The approxmul command, and the package's import, when the library is missing or not approxmul's.

The command promises one line per error and no traceback; the library is
opened as the package is imported, before the command's own code runs.
"""

import os
import subprocess
import sys
import textwrap

import pytest
from support import package_copy


def other_library():
    """A shared library that opens but is not approxmul's: cffi's own backend."""
    import _cffi_backend

    return _cffi_backend.__file__


def run(args, library, root, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("APPROXMUL_LIBRARY", "PYTHONPATH")}
    env.update(APPROXMUL_LIBRARY=str(library), PYTHONPATH=str(root))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


COMMANDS = [["-m", "approxmul_cffi", "--help"], ["-m", "approxmul_cffi.cli", "--help"],
            ["-m", "approxmul_cffi", "metrics", "exact"], ["-m", "approxmul_cffi", "info"]]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[1:]))
def test_command_without_the_library_says_so_in_one_line(args, tmp_path):
    package = package_copy(tmp_path / "site")
    missing = tmp_path / "nowhere" / "libapproxmul.so"
    out = run(args, missing, tmp_path / "site", tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("approxmul: error: cannot open the approxmul library; tried: "
                                 f"{missing} (APPROXMUL_LIBRARY): no such file; "
                                 f"{package / 'libapproxmul.so'} (package directory): no such "
                                 "file; ")
    assert "APPROXMUL_LIBRARY at a built" in out.stderr


@pytest.mark.parametrize("args", COMMANDS[::2], ids=lambda a: " ".join(a[1:]))
def test_command_with_a_library_that_is_not_approxmul_s(args, tmp_path):
    package_copy(tmp_path / "site")
    other = other_library()
    out = run(args, other, tmp_path / "site", tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"{other} (APPROXMUL_LIBRARY): not an approxmul library" in out.stderr


def test_import_with_a_library_that_is_not_approxmul_s(tmp_path):
    code = textwrap.dedent("""
        try:
            import approxmul_cffi
        except ImportError as error:
            print(type(error).__name__)
            print(error)
    """)
    package_copy(tmp_path / "site")
    other = other_library()
    out = run(["-c", code], other, tmp_path / "site", tmp_path)
    assert out.returncode == 0, out.stderr
    kind, message = out.stdout.split("\n", 1)
    assert kind == "LibraryNotFoundError"  # the package's own error, not cffi's AttributeError
    assert message.startswith("cannot open the approxmul library; tried:\n")
    assert (f"  {other} (APPROXMUL_LIBRARY): not an approxmul library (it has no "
            "approxmul_abi_version function)") in message
    # a package holding the library falls back to it, saying why
    package = package_copy(tmp_path / "full", with_library=True)
    code = textwrap.dedent("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import approxmul_cffi
        print(approxmul_cffi.library_path())
        print(caught[0].message)
    """)
    out = run(["-c", code], other, tmp_path / "full", tmp_path)
    assert out.returncode == 0, out.stderr
    path, message = out.stdout.split("\n", 1)
    assert path == str(package / "libapproxmul.so")
    assert f"{other} (APPROXMUL_LIBRARY): not an approxmul library" in message


def test_command_with_a_library_of_another_abi_version(tmp_path):
    package = package_copy(tmp_path / "site", with_library=True)
    cdef = package / "_cdef.py"
    text = cdef.read_text()
    version = int(text.split("ABI_VERSION = ")[1].split()[0])
    cdef.write_text(text.replace(f"ABI_VERSION = {version}", f"ABI_VERSION = {version + 1}"))
    out = run(["-m", "approxmul_cffi", "info"], "", tmp_path / "site", tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr == (f"approxmul: error: {package / 'libapproxmul.so'} has ABI version "
                          f"{version}, but this approxmul_cffi was written for ABI version "
                          f"{version + 1}\n")


def test_other_programs_still_get_the_exception(tmp_path):
    # a script named like nothing of the command's: the import raises as before
    package_copy(tmp_path / "site")
    script = tmp_path / "mine.py"
    script.write_text("import approxmul_cffi\n")
    out = run([str(script), "--help"], tmp_path / "missing.so", tmp_path / "site", tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("Traceback")
    assert "\napproxmul_cffi.errors.LibraryNotFoundError: cannot open the approxmul library" \
        in out.stderr
