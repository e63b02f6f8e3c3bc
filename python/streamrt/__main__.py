"""``python3 -m streamrt`` (and the ``streamrt`` command that pip installs): the streamrt tool.

Without a command (or with ``--version``): what ``streamrt --version`` prints (the library's
version, build type, compiler, backends and worker count), then where this Python package and its
library come from. ``demo`` and ``bench`` run the streamrt tool built with this package, with the
same options (``demo --help``, ``bench --help``)."""

import os
import sys

from . import _streamrt

_TOOL_COMMANDS = ("demo", "bench")


def _usage(prog):
    return (
        f"usage: {prog} [command] [options]\n"
        "\n"
        "commands:\n"
        "  (none), --version  the library's version, build type, compiler, backends and worker\n"
        "                     count, then the Python version and where the package and the\n"
        "                     library it loaded come from\n"
        "  demo               run the seed scenarios on CPU streams and report timings\n"
        "                     (demo --help)\n"
        "  bench              compare streamrt with std::async, threads, oneTBB, Asio, OpenCL\n"
        "                     (bench --help)\n"
        "  -h, --help, help   show this text\n"
        "\n"
        "demo and bench run the streamrt command-line tool built with this package.\n"
    )


def _loaded_library():
    # The libstreamrt this process mapped: the one the extension's RPATH (or the loader) found.
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                if "libstreamrt.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return "unknown"


def _version():
    sys.stdout.write(_streamrt._version_text())
    print(f"python: {sys.version.split()[0]} ({sys.executable})")
    print(f"package: {os.path.dirname(os.path.abspath(__file__))}")
    print(f"library: {_loaded_library()}")
    return 0


def _tool():
    """The streamrt tool's path, or (None, why there is none)."""
    try:
        from . import _tool as where  # written by the build (python/CMakeLists.txt, setup.py)
    except ImportError:
        return None, "this copy of the package was not built by CMake or pip (no _tool.py)"
    if where.TOOL is None:
        return None, where.REASON
    path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), where.TOOL))
    if not os.access(path, os.X_OK):
        return None, f"the streamrt tool is not at {path} (was it installed with the package?)"
    return path, None


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    prog = "streamrt" if os.path.basename(sys.argv[0]) == "streamrt" else "python3 -m streamrt"
    if not args or args[0] in ("--version", "version"):
        return _version()
    if args[0] in ("-h", "--help", "help"):
        sys.stdout.write(_usage(prog))
        return 0
    if args[0] in _TOOL_COMMANDS:
        tool, why = _tool()
        if tool is None:
            print(f"{prog} {args[0]}: {why}", file=sys.stderr)
            return 2
        sys.stdout.flush()
        sys.stderr.flush()
        # The tool replaces this process: its output, exit code and signals are the command's.
        os.execv(tool, [tool] + args)
    print(f"{prog}: unknown command '{args[0]}'\n", file=sys.stderr)
    sys.stderr.write(_usage(prog))
    return 2


if __name__ == "__main__":
    sys.exit(main())
