"""The release wheel (scripts/build_wheels.sh) holds what users need and nothing else.

APPROXMUL_WHEEL names a built wheel (CI's wheel job sets it); without it the
wheel is built here from the committed sources (about a minute; needs a
compiler, binutils and PyPI for the build tools). Size budget: 1.5 MiB
compressed, 6 MiB installed (docs/packaging.md).
"""

import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import zipfile

import pytest

from support import ROOT

COMPRESSED_BUDGET = 3 * 2**19  # 1.5 MiB
INSTALLED_BUDGET = 6 * 2**20
LIBRARY = "approxmul_cffi/libapproxmul.so"
# what a manylinux system provides (PEP 600); anything else must be vendored
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1",
                    "libpthread.so.0", "libdl.so.2", "ld-linux-x86-64.so.2",
                    "ld-linux-aarch64.so.1"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the release wheel is a manylinux wheel")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    given = os.environ.get("APPROXMUL_WHEEL")
    if given:
        path = pathlib.Path(given)
        assert path.is_file(), f"APPROXMUL_WHEEL={given} does not exist"
        return path
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(["bash", str(ROOT / "scripts" / "build_wheels.sh"), str(out)],
                   check=True, capture_output=True, text=True, timeout=900)
    (path,) = out.glob("*.whl")
    return path


@pytest.fixture(scope="module")
def names(wheel):
    with zipfile.ZipFile(wheel) as archive:
        return [n for n in archive.namelist() if not n.endswith("/")]  # files, not folders


@pytest.fixture(scope="module")
def unpacked(wheel, tmp_path_factory):
    where = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(where)
    return where


def project_version():
    text = (ROOT / "meson.build").read_text()
    return re.search(r"version:\s*'([^']+)'", text).group(1)


def readelf_dynamic(path):
    out = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True,
                         text=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.+)\]", out)
    rpath = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.+)\]", out)
    return needed, rpath


def test_file_name_and_tags_claim_any_python_on_manylinux(wheel, unpacked):
    version = project_version()
    machine = platform.machine()
    match = re.fullmatch(rf"approxmul-{re.escape(version)}-py3-none-manylinux_2_(\d+)_{machine}\.whl",
                         wheel.name)
    assert match, wheel.name
    wheel_info = (unpacked / f"approxmul-{version}.dist-info" / "WHEEL").read_text()
    tags = re.findall(r"^Tag: (.+)$", wheel_info, re.M)
    assert tags == [f"py3-none-manylinux_2_{match.group(1)}_{machine}"]
    assert "Root-Is-Purelib: false" in wheel_info
    metadata = (unpacked / f"approxmul-{version}.dist-info" / "METADATA").read_text()
    assert re.search(r"^Requires-Dist: cffi>=1\.15$", metadata, re.M)


def test_holds_the_package_the_models_and_the_library(names, unpacked):
    tracked = subprocess.run(["git", "ls-files", "approxmul_cffi"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    package = sorted(n for n in names if n.startswith("approxmul_cffi/"))
    assert package == sorted(tracked + [LIBRARY])
    for model in ("approxmul_cffi/models/digits_lenet.json", "approxmul_cffi/models/digits_lenet.npz"):
        assert (unpacked / model).read_bytes() == (ROOT / model).read_bytes()


def test_nothing_else(names, wheel):
    version = project_version()
    dist_info = f"approxmul-{version}.dist-info/"
    others = sorted(n for n in names if not n.startswith(("approxmul_cffi/", dist_info)))
    vendored = [n for n in others if n.startswith("approxmul.libs/")]
    # exactly one vendored library, the OpenMP runtime under auditwheel's hashed name
    assert len(vendored) == 1 and re.fullmatch(r"approxmul\.libs/libgomp-[0-9a-f]{8}\.so\.1[.0-9]*",
                                               vendored[0]), vendored
    assert [n for n in others if n not in vendored] == [f"approxmul-{version}.data/headers/approxmul.h"]
    leftovers = [n for n in names if re.search(
        r"(__pycache__|\.pyc$|\.o$|\.a$|\.ninja|meson-|/build|\.orig$|~$|\.cpython-|\.abi3\.|pypy)", n)]
    assert leftovers == []


def test_size_budget(wheel, unpacked):
    assert wheel.stat().st_size <= COMPRESSED_BUDGET, wheel.stat().st_size
    installed = sum(p.stat().st_size for p in unpacked.rglob("*") if p.is_file())
    assert installed <= INSTALLED_BUDGET, installed


def test_library_needs_only_the_system_and_the_vendored_runtime(unpacked, names):
    needed, rpath = readelf_dynamic(unpacked / LIBRARY)
    (vendored,) = [pathlib.PurePosixPath(n).name for n in names if n.startswith("approxmul.libs/")]
    assert vendored in needed
    assert set(needed) - {vendored} <= SYSTEM_LIBRARIES, needed
    assert rpath == ["$ORIGIN/../approxmul.libs"]
    # py3-none is true: nothing in the wheel calls the Python C API
    for elf in (unpacked / LIBRARY, unpacked / "approxmul.libs" / vendored):
        undefined = subprocess.run(["nm", "-D", "--undefined-only", str(elf)], check=True,
                                   capture_output=True, text=True).stdout
        assert not re.search(r"\bU _?Py", undefined)
        assert set(readelf_dynamic(elf)[0]) - {vendored} <= SYSTEM_LIBRARIES


def test_installed_wheel_loads_its_own_library_and_runtime(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("APPROXMUL_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["PYTHONPATH"] = str(target)
    code = (
        "import approxmul_cffi as am\n"
        "a = memoryview(bytearray([1, 2, 3, 4])).cast('B', shape=[2, 2])\n"
        "print(am.library_path())\n"
        "print(am.info()['openmp_runtime'])\n"
        "print(am.matmul(a, a, am.Multiplier.exact(8)).tolist())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            cwd=tempfile.gettempdir(), timeout=120)
    assert result.returncode == 0, result.stderr
    library, runtime, product = result.stdout.splitlines()
    assert library == str(target / LIBRARY)
    assert pathlib.Path(runtime).parent.resolve() == (target / "approxmul.libs").resolve()
    assert product == "[[7, 10], [15, 22]]"
