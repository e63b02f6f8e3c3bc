"""`cmake --install` puts the package where Debian's python finds it, and the installed extension
loads the installed libstreamrt (relative RPATH), not the build tree's. Runs when the package
under test comes from a CMake build tree (as in `make test-python`)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import streamrt

PACKAGE_DIR = pathlib.Path(streamrt.__file__).resolve().parent
BUILD_DIR = PACKAGE_DIR.parent.parent  # <build>/python/streamrt


def build_tree_or_skip():
    if not (BUILD_DIR / "CMakeCache.txt").is_file():
        pytest.skip(f"streamrt was not imported from a CMake build tree ({PACKAGE_DIR})")
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not on PATH")


def site_dir(prefix):
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return prefix / "lib" / f"python{version}" / "dist-packages"


def test_install_to_a_prefix_and_import_from_there(tmp_path):
    build_tree_or_skip()
    prefix = tmp_path / "prefix"
    subprocess.run(
        ["cmake", "--install", str(BUILD_DIR), "--prefix", str(prefix)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    site = site_dir(prefix)
    assert (site / "streamrt" / "__init__.py").is_file()
    assert (site / "streamrt" / "_streamrt.pyi").is_file()
    assert (site / "streamrt" / "py.typed").is_file()
    # Import it from the prefix alone: no build tree on the path, run from elsewhere.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = str(site)
    probe = (
        "import streamrt, numpy as np\n"
        "s = streamrt.Stream()\n"
        "out = []\n"
        "s.launch(out.append, 1)\n"
        "s.synchronize()\n"
        "assert out == [1]\n"
        "assert streamrt.allclose(streamrt.ones(2, 2) @ streamrt.ones(2, 2), np.full((2, 2), 2.0, np.float32))\n"
        "print(streamrt.__file__)\n"
        "print([l.split()[-1] for l in open('/proc/self/maps') if 'libstreamrt.so' in l][0])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    module_file, library = proc.stdout.split()
    assert pathlib.Path(module_file).resolve().is_relative_to(site.resolve())
    assert pathlib.Path(library).resolve().is_relative_to(prefix.resolve())
    # `python -m streamrt demo` runs the installed tool (prefix/bin), not the build tree's.
    where = subprocess.run(
        [sys.executable, "-c", "import streamrt.__main__ as m; print(m._tool())"], env=env,
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert where.returncode == 0, where.stderr
    if "None" not in where.stdout.split(",")[0]:
        assert str(prefix / "bin" / "streamrt") in where.stdout, where.stdout
        demo = subprocess.run(
            [sys.executable, "-m", "streamrt", "demo", "--help"], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=120,
        )
        assert demo.returncode == 0, demo.stderr
        assert demo.stdout.startswith("usage: streamrt demo")


def cache_value(name):
    text = (BUILD_DIR / "CMakeCache.txt").read_text()
    match = re.search(rf"^{name}:[A-Z]+=(.*)$", text, re.MULTILINE)
    assert match, f"{name} is not in the CMake cache"
    return match.group(1)


def test_default_install_dir_is_on_debian_pythons_path():
    build_tree_or_skip()
    if sys.prefix != sys.base_prefix:
        pytest.skip("a virtual environment: the default install dir is for Debian's own python3")
    prefix = pathlib.Path(cache_value("CMAKE_INSTALL_PREFIX"))
    target = prefix / cache_value("STREAMRT_PYTHON_INSTALL_DIR")
    if prefix in (pathlib.Path("/usr"), pathlib.Path("/usr/local")):
        assert target in [pathlib.Path(p) for p in sys.path if p], (target, sys.path)
    else:
        assert target == site_dir(prefix)
