"""Whole-process behaviour: clean exit after OpenMP work, library lookup errors."""

import textwrap

from support import ROOT, package_copy


def test_process_that_used_the_library_exits_cleanly(python_runner):
    code = textwrap.dedent("""
        import numpy as np, approxmul_cffi as am
        am.set_num_threads(2)
        m = am.Multiplier.from_table(np.arange(65536).reshape(256, 256) % 1000)
        a = np.ones((256, 300), np.uint8)
        for _ in range(3):
            am.matmul(a, a.T, m)
        print("done")
    """)
    for _ in range(3):
        result = python_runner(code)
        assert result.returncode == 0, (result.returncode, result.stderr)
        assert result.stdout.strip() == "done"


def test_missing_library_lists_every_path_tried(python_runner, tmp_path):
    # the source package (no library inside) with a wrong APPROXMUL_LIBRARY
    code = textwrap.dedent("""
        try:
            import approxmul_cffi
        except ImportError as error:
            print(type(error).__name__, error)
    """)
    missing = tmp_path / "nowhere" / "libapproxmul.so"
    result = python_runner(code, env={"APPROXMUL_LIBRARY": str(missing),
                                      "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("LibraryNotFoundError cannot open the approxmul library")
    assert f"{missing} (APPROXMUL_LIBRARY): no such file" in result.stdout
    assert str(ROOT / "approxmul_cffi" / "libapproxmul.so") + " (package directory)" \
        in result.stdout


def test_broken_override_falls_back_with_a_warning(python_runner, tmp_path):
    bogus = tmp_path / "libapproxmul.so"
    bogus.write_bytes(b"not an ELF file")
    code = textwrap.dedent("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import approxmul_cffi
        print(approxmul_cffi.library_path())
        print(caught[0].message)
    """)
    # a package holding the library falls back to it
    package = package_copy(tmp_path / "site", with_library=True)
    result = python_runner(code, env={"APPROXMUL_LIBRARY": str(bogus),
                                      "PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode == 0, result.stderr
    path, message = result.stdout.split("\n", 1)
    assert path == str(package / "libapproxmul.so")
    assert str(bogus) in message and "failing to open" in message
    # a package holding none: the import fails and names the bad file
    package_copy(tmp_path / "bare", with_library=False)
    result = python_runner(code, env={"APPROXMUL_LIBRARY": str(bogus),
                                      "PYTHONPATH": str(tmp_path / "bare")})
    assert result.returncode != 0
    assert "cannot open the approxmul library" in result.stderr
    assert str(bogus) in result.stderr


def test_library_of_another_abi_version_is_refused(python_runner, tmp_path):
    package = package_copy(tmp_path / "site", with_library=True)
    cdef = package / "_cdef.py"
    text = cdef.read_text()
    assert text.count("ABI_VERSION = ") == 1
    version = int(text.split("ABI_VERSION = ")[1].split()[0])
    cdef.write_text(text.replace(f"ABI_VERSION = {version}", f"ABI_VERSION = {version + 1}"))
    result = python_runner("import approxmul_cffi", env={"APPROXMUL_LIBRARY": "",
                                                          "PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last == (f"approxmul_cffi.errors.LibraryNotFoundError: {package / 'libapproxmul.so'} "
                    f"has ABI version {version}, but this approxmul_cffi was written for ABI "
                    f"version {version + 1}")


def test_python_m_pytest_from_the_root_imports_the_installed_package():
    # `python -m pytest` puts the root first on sys.path; tests/conftest.py
    # keeps ./approxmul_cffi (no library inside) from shadowing the install
    import importlib.metadata
    import os
    import subprocess
    import sys

    import pytest

    try:
        importlib.metadata.distribution("approxmul")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("approxmul is not pip-installed here (CI's main job installs it)")
    env = {k: v for k, v in os.environ.items() if k not in ("APPROXMUL_LIBRARY", "PYTHONPATH")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/portable/test_core.py"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_ctrl_c_stops_a_long_call_on_the_main_thread_and_the_wakeup_fd_is_restored(python_runner):
    # A long call runs on the main thread (its OpenMP team is the one torch
    # uses too); Ctrl-C reaches it through Python's wakeup fd, which must be
    # the caller's own again afterwards and receive the signal's byte (asyncio
    # learns its signals there). Then the same in a forked child.
    code = textwrap.dedent("""
        import os, signal, socket, threading, time, numpy as np, approxmul_cffi as am
        a, b = np.ones((3000, 4000), np.uint16), np.ones((4000, 6000), np.uint16)
        m = am.Multiplier.exact(16)  # several seconds uninterrupted
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        signal.set_wakeup_fd(mine.fileno())
        def attempt():
            am.set_num_threads(1)
            timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            start = time.monotonic()
            try:
                am.matmul(a, b, m)
                return "finished"
            except KeyboardInterrupt:
                return f"interrupted {time.monotonic() - start < 1.5}"
        print(attempt(), signal.set_wakeup_fd(-1) == mine.fileno(),
              theirs.recv(16) == bytes([signal.SIGINT]))
        signal.set_wakeup_fd(mine.fileno())
        pid = os.fork()
        if pid == 0:
            os._exit(0 if attempt() == "interrupted True" else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    result = python_runner(code, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["interrupted", "True", "True", "True", "child", "0"]
