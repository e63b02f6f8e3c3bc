#!/usr/bin/env python3
"""Checks that the C++ sources are formatted as the repository's .clang-format says.

Runs `clang-format --dry-run --Werror` (clang-format 14, Debian 12's: other versions format some
constructs differently, so the check refuses them rather than report differences no one can fix
with `make format`) over every .cpp, .hpp, .h and .cc file under the folders below, except the
files EXCLUDED names. Each excluded file is printed, so that nothing is left out silently.

Usage: check_format.py ROOT [--clang-format PATH] [--fix]   (exit status 1 when a file is not
formatted). --fix formats the same files in place instead (`make format` runs that).
"""
import argparse
import fnmatch
import pathlib
import re
import shutil
import subprocess
import sys

FOLDERS = ["include", "src", "tools", "bench", "tests", "examples", "fuzz", "python/src"]
SUFFIXES = {".cpp", ".hpp", ".h", ".cc"}
VERSION = 14

# Files left out, as patterns relative to the repository root (none: every C++ source is formatted).
EXCLUDED: list = []


def excluded(rel: str) -> bool:
    return any(fnmatch.fnmatchcase(rel, pattern) for pattern in EXCLUDED)


def sources(root: pathlib.Path):
    """(checked, excluded) files under FOLDERS, relative to `root`, sorted."""
    checked, skipped = [], []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            (skipped if excluded(rel) else checked).append(rel)
    return checked, skipped


def find_clang_format(given):
    for candidate in [given] if given else [f"clang-format-{VERSION}", "clang-format"]:
        path = shutil.which(candidate)
        if path is None:
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"version (\d+)\.", out)
        if m and int(m.group(1)) == VERSION:
            return path, None
        found = out.strip() or "of an unknown version"
        return None, f"{path} is {found}, not clang-format {VERSION}"
    if given:
        return None, f"{given} not found"
    return None, (f"no clang-format-{VERSION} on PATH "
                  f"(Debian: apt-get install clang-format-{VERSION})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--clang-format", dest="clang_format")
    parser.add_argument("--fix", action="store_true", help="format the files in place")
    args = parser.parse_args()
    tool, why = find_clang_format(args.clang_format)
    if tool is None:
        print(f"check_format: {why}")
        return 1
    checked, skipped = sources(args.root)
    for rel in skipped:
        print(f"not checked (EXCLUDED in {pathlib.Path(__file__).name}): {rel}")
    mode = ["-i"] if args.fix else ["--dry-run", "--Werror"]
    bad = []
    for start in range(0, len(checked), 50):  # in batches: one command line per batch
        batch = checked[start:start + 50]
        run = subprocess.run([tool, *mode, *batch], cwd=args.root, capture_output=True, text=True)
        if run.returncode != 0:
            sys.stdout.write(run.stderr)
            named = {line.split(":", 1)[0] for line in run.stderr.splitlines()
                     if ": error: " in line}
            bad += sorted(named) if named else [f"(clang-format failed on {batch[0]}..)"]
    if bad:
        print(f"{len(bad)} file(s) not formatted as .clang-format says: {' '.join(bad)}")
        print("fix: make format (or clang-format -i FILE)")
        return 1
    done = "formatted" if args.fix else "formatted as .clang-format says"
    print(f"{len(checked)} files {done} ({len(skipped)} excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
