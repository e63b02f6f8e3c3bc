#!/usr/bin/env python3
"""Source rules the compiler does not check (run by CTest, tests/source/CMakeLists.txt).

  includes   no include under src/ that climbs out of its folder ("../"), and, with --layer,
             none that names a layer the including layer may not use: src/ops/x.cpp may
             include "core/capture.hpp" but not "cpu/cpu_backend.hpp". The compiler refuses
             those too (each layer compiles with an include root that holds only the layers it
             may use, src/CMakeLists.txt); this check names the file and the rule, and also
             covers headers no source of the layer includes yet.
  functions  with --max-lines N: no function in src/ longer than N lines, signature to closing
             brace (off by default).
  issues     no tracker issue numbers (the word "issue" and a number, or a number after "(#") in
             code, tests, build files or output text of the C++ tree: names and comments say
             what, not which ticket.

Usage: check_sources.py ROOT [--layer NAME=USES,...]... [--max-lines N] [--longest K]. Prints
each breach (file:line) and exits 1 when there is one; with --longest, also prints the K longest
functions.
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


def blank_literals(text):
    """`text` with comments, string and character literals and preprocessor lines replaced by
    spaces (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A directive, with its continuation lines.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("  \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^(\s]*)\(', text[i:i + 40])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator: 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


CONTAINER = re.compile(r"\b(namespace|class|struct|union|extern)\b")


def functions(text):
    """(name, first line, last line) of every function body at namespace or class scope."""
    code = blank_literals(text)
    found = []
    stack = []  # per open brace: "container", "function", "init" (a brace member initializer) or "other"
    head_start = None  # offset where the current head (text since the last ; { }) starts
    head = []
    line = 1
    for pos, c in enumerate(code):
        if c == "\n":
            line += 1
        at_scope = all(kind == "container" for kind, _, _ in stack)
        if c in "{};":
            head_text = "".join(head)
            if c == "{":
                kind = "other"
                if at_scope:
                    if CONTAINER.search(head_text) and "(" not in head_text.split("{")[0]:
                        kind = "container"
                    elif "(" in head_text:
                        after_paren = head_text[head_text.rfind(")") + 1:]
                        if ":" in head_text and re.search(r"[\w>]\s*$", head_text) and not re.search(
                                r"\)\s*(const|noexcept|override|final|mutable|->.*)?\s*$", head_text):
                            kind = "init"  # Foo() : a_{1} -- the body comes later
                        elif "=" in after_paren and "operator" not in head_text:
                            kind = "other"
                        else:
                            kind = "function"
                start_line = code.count("\n", 0, head_start) + 1 if head_start is not None else line
                stack.append((kind, start_line, head_text))
                if kind != "init":
                    head, head_start = [], None
                else:
                    head.append(c)
                continue
            if c == "}":
                if stack:
                    kind, start_line, head_text = stack.pop()
                    if kind == "function":
                        name = re.findall(r"([~\w:]+|operator\s*\S+)\s*\(", head_text)
                        found.append((name[0] if name else "?", start_line, line))
                    if kind == "init":
                        head.append(c)
                        continue
                head, head_start = [], None
                continue
            head, head_start = [], None
            continue
        if at_scope:
            if head_start is None and not c.isspace():
                head_start = pos
            if head_start is not None:
                head.append(c)
    return found


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
    ap.add_argument("--max-lines", type=int, default=0)
    ap.add_argument("--longest", type=int, default=0)
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    layers = {}
    for rule in args.layer:
        name, _, uses = rule.partition("=")
        layers[name] = {u for u in uses.split(",") if u}
    breaches = include_breaches(root, layers)
    lengths = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in CXX:
            continue
        rel = path.relative_to(root)
        text = path.read_text(encoding="utf-8")
        for name, first, last in functions(text):
            n = last - first + 1
            lengths.append((n, f"{rel}:{first}", name))
            if args.max_lines and n > args.max_lines:
                breaches.append(f"{rel}:{first}: {name} is {n} lines (at most {args.max_lines}): "
                                "split it into named steps")
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
    if args.longest:
        for n, where, name in sorted(lengths, reverse=True)[:args.longest]:
            print(f"{n:4d} {where} {name}")
    for b in breaches:
        print(b)
    print(f"check_sources: {len(lengths)} functions in src/, {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
