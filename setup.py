"""setuptools side of `pip install .` (see pyproject.toml): builds libstreamrt, the _streamrt
extension and the streamrt tool with CMake (the streamrt_python_package target) and ships the
library inside the package, where the extension's RPATH ($ORIGIN) finds it, and the tool in the
package's bin/ (RPATH $ORIGIN/..), which `python -m streamrt demo|bench` and the `streamrt`
command (pyproject.toml's [project.scripts]) run.

Environment: CMAKE_ARGS (extra CMake arguments, e.g. a compiler launcher), STREAMRT_BUILD_TYPE
(default Release), CMAKE_BUILD_PARALLEL_LEVEL (build jobs), STREAMRT_PIP_BUILD (the build folder,
default build-pip: builds for two interpreters or torches each keep their own CMake build instead of
reconfiguring one back and forth)."""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(\s*streamrt\s+VERSION\s+([0-9.]+)", text)
    if not match:
        raise RuntimeError("setup.py: no project(streamrt VERSION ...) in CMakeLists.txt")
    return match.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("pip install of streamrt needs cmake (Debian: apt-get install cmake)")
        temp = pathlib.Path(self.build_temp).resolve()
        build_dir, stage = temp / "cmake", temp / "stage"
        # The package and the library install into one folder of the stage: the extension's
        # RPATH is then $ORIGIN (python/CMakeLists.txt computes it from these two places); the
        # tool into its bin/ folder (RPATH $ORIGIN/.., tools/streamrt/CMakeLists.txt).
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=" + os.environ.get("STREAMRT_BUILD_TYPE", "Release"),
            "-DPython3_EXECUTABLE=" + sys.executable,
            "-DCMAKE_INSTALL_PREFIX=" + str(stage),
            "-DSTREAMRT_PYTHON_INSTALL_DIR=python",
            "-DCMAKE_INSTALL_LIBDIR=python/streamrt",
            "-DCMAKE_INSTALL_BINDIR=python/streamrt/bin",
            "-DSTREAMRT_BUILD_PYTHON=ON",
            "-DSTREAMRT_BUILD_TESTS=OFF",
            # The tool's `streamrt bench` (bench/command) needs no benchmark peer library, and the
            # benchmark suites are not built.
            "-DSTREAMRT_BUILD_BENCH=OFF",
            "-DSTREAMRT_BUILD_EXAMPLES=OFF",
            "-DSTREAMRT_BUILD_TOOLS=ON",
            "-DSTREAMRT_BUILD_FUZZ=OFF",
        ] + shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        # Every target the install step installs: the library, the extension, the tool and, when
        # MPI is found, streamrt::mpi and streamrt.distributed's extension (not the benchmark
        # suites; tests and examples are off above).
        subprocess.run(["cmake", "--build", str(build_dir), "-j", jobs,
                        "--target", "streamrt_python_package"], check=True)
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.run(["cmake", "--install", str(build_dir)], check=True,
                       stdout=subprocess.DEVNULL)

        package = stage / "python" / "streamrt"
        built = sorted(package.glob("_streamrt.*.so"))
        if len(built) != 1:
            raise RuntimeError(f"setup.py: expected one _streamrt.*.so in {package}, found {built}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)
        # The libraries under their sonames only (what the extensions ask the loader for), as files.
        for lib in ("libstreamrt", "libstreamrt_mpi"):
            sonames = [p for p in package.glob(lib + ".so.*") if p.name.count(".") == 2]
            if lib == "libstreamrt" and len(sonames) != 1:
                raise RuntimeError(f"setup.py: expected one {lib}.so.N in {package}, found {sonames}")
            for so in sonames:
                shutil.copyfile(so.resolve(), target.parent / so.name)
        # streamrt.distributed's extension, built when CMake found MPI.
        for mpi_ext in package.glob("_streamrt_mpi.*.so"):
            shutil.copyfile(mpi_ext, target.parent / mpi_ext.name)
        # The tool (shutil.copy keeps its mode: executable) and where the package finds it.
        tool = package / "bin" / "streamrt"
        if not tool.is_file():
            raise RuntimeError(f"setup.py: the streamrt tool was not installed at {tool}")
        (target.parent / "bin").mkdir(exist_ok=True)
        shutil.copy(tool, target.parent / "bin" / "streamrt")
        shutil.copyfile(package / "_tool.py", target.parent / "_tool.py")
        # streamrt.torch's kernel runner, built when CMake found torch's C++ API. One from an
        # earlier build for another torch must not ship beside this build's package.
        for stale in target.parent.glob("_streamrt_torch.*.so"):
            stale.unlink()
        for torch_ext in package.glob("_streamrt_torch.*.so"):
            shutil.copyfile(torch_ext, target.parent / torch_ext.name)
        report_torch_extension(build_dir / "python" / "_streamrt_torch-status.txt")


def report_torch_extension(status_file):
    """Says whether streamrt.torch's fast path was built, and why not: without it streamrt.torch
    still works, through Python, so nothing fails and the reason would otherwise stay in CMake's
    configure output. (pip shows a build's output with -v, or when it fails.)"""
    try:
        status = status_file.read_text().strip()
    except OSError:
        status = "not built: CMake did not say why (no " + str(status_file) + ")"
    if not status.startswith("built"):
        status += "; streamrt.torch calls torch ops through Python"
    print("streamrt: streamrt._streamrt_torch (streamrt.torch's fast path) " + status,
          file=sys.stderr, flush=True)


setup(
    version=project_version(),
    packages=["streamrt"],
    package_dir={"": "python"},
    package_data={"streamrt": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("streamrt._streamrt", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # Not setuptools' default "build": that is the Makefile's CMake build folder.
    options={"build": {"build_base": os.environ.get("STREAMRT_PIP_BUILD") or "build-pip"}},
    zip_safe=False,
)
