#!/usr/bin/env python3
"""Source rules the compiler does not check (run by CTest, tests/source/CMakeLists.txt).

  includes   no include under src/ that climbs out of its folder ("../"), and, with --layer,
             none that names a layer the including layer may not use: src/ops/x.cpp may
             include "core/capture_state.hpp" but not "cpu/cpu_backend.hpp". The compiler refuses
             those too (each layer compiles with an include root that holds only the layers it
             may use, src/CMakeLists.txt); this check names the file and the rule, and also
             covers headers no source of the layer includes yet.
  (function lengths, formatting and doc citations: function_length.py, check_format.py and
  check_doc_citations.py, beside this file)
  issues     no tracker issue numbers (the word "issue" and a number, or a number after "(#") in
             code, tests, build files or output text of the C++ tree: names and comments say
             what, not which ticket.

Usage: check_sources.py ROOT [--layer NAME=USES,...]... Prints each breach (file:line) and exits
1 when there is one.
"""
import argparse
import pathlib
import re
import sys

CXX = {".cpp", ".hpp", ".h", ".cc"}
ISSUE_DIRS = ["src", "include", "tests", "tools", "bench", "fuzz", "examples", "cmake", "python"]
ISSUE_FILES = ["CMakeLists.txt", "Makefile"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
ISSUE_RE = re.compile(r"\bissues?[ -]?#?[0-9]+|\(#[0-9]+\)", re.IGNORECASE)


def include_breaches(root, layers):
    """Includes under src/ that climb out of a folder or name a layer the file's layer may not
    use. `layers` maps a layer (a folder of src/) to the folders it may include from."""
    folders = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    breaches = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in CXX:
            continue
        rel = path.relative_to(root)
        layer = rel.parts[1]
        for no, l in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = INCLUDE_RE.match(l)
            if not m:
                continue
            name = m.group(1)
            if ".." in pathlib.PurePosixPath(name).parts:
                breaches.append(f"{rel}:{no}: #include \"{name}\" climbs out of the folder; include "
                                "a layer's header by its root name (core/...)")
                continue
            first = pathlib.PurePosixPath(name).parts[0]
            if layer in layers and first in folders and first != layer and \
                    first not in layers[layer]:
                uses = ", ".join(sorted(layers[layer])) or "no other layer"
                breaches.append(f"{rel}:{no}: #include \"{name}\": the {layer} layer may use "
                                f"{uses}, not {first} (src/CMakeLists.txt); what it needs from a "
                                "backend goes through include/streamrt/impl/backend.hpp")
    return breaches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--layer", action="append", default=[],
                    help="NAME=USES,...: the layers the folder src/NAME may include from")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    layers = {}
    for rule in args.layer:
        name, _, uses = rule.partition("=")
        layers[name] = {u for u in uses.split(",") if u}
    breaches = include_breaches(root, layers)
    files = [p for d in ISSUE_DIRS for p in sorted((root / d).rglob("*")) if p.is_file()]
    files += [root / f for f in ISSUE_FILES if (root / f).exists()]
    for path in files:
        if path.suffix not in CXX | {".txt", ".cmake", ".py", ".sh", ".in", ""}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, l in enumerate(text.splitlines(), 1):
            m = ISSUE_RE.search(l)
            if m:
                breaches.append(f"{path.relative_to(root)}:{no}: names a tracker issue "
                                f"('{m.group(0)}'); say what the code does instead")
    for b in breaches:
        print(b)
    print(f"check_sources: {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
