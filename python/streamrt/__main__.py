"""``python3 -m streamrt``: what ``streamrt --version`` prints (the library's version, build type,
compiler, backends and worker count), then where this Python package and its library come from."""

import os
import sys

from . import _streamrt


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


def main() -> int:
    sys.stdout.write(_streamrt._version_text())
    print(f"python: {sys.version.split()[0]} ({sys.executable})")
    print(f"package: {os.path.dirname(os.path.abspath(__file__))}")
    print(f"library: {_loaded_library()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
