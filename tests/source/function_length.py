#!/usr/bin/env python3
"""Lists every function in the given C++ trees and Python files whose body is longer than a limit.

C++: a brace counter, not a parser: comments, string and character literals and preprocessor lines are
blanked first, then every outermost brace block whose header ends like a function's (a parameter
list, then qualifiers, a trailing return type or a constructor's initialiser list) counts as one
function, lambdas and local classes inside it included. Lines are counted from the line of the
opening brace to the line of the closing one.

Python (.py files, parsed): every function and method, from its `def` line to its last line,
nested functions inside it included (and each nested one checked on its own too).

Usage: function_length.py [--max N] PATH...   (exit status 1 when any function is longer). A PATH
is a file, a folder (its C++ files) or a glob pattern such as 'python/streamrt/_torch*.py'.
"""
import argparse
import ast
import glob
import pathlib
import re
import sys

SUFFIXES = {".cpp", ".hpp", ".h", ".cc", ".cxx", ".hxx", ".ipp"}
SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")
INIT_LIST_MEMBER = re.compile(r"\)\s*(noexcept\s*)?:[^:].*[\w>]$")
INIT = "init"
NAME = re.compile(r"([~\w:]+(?:operator\s*[^\s(]+)?)\s*(?:<[^()]*>)?\s*\($")


def blank(text: str) -> str:
    """`text` with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its continuation lines
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        line_start = c == "\n"
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
        raw = re.match(r'(?:u8|[uUL])?R"([^ ()\\\t\n]{0,16})\(', text[i:i + 24])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        if c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def is_function_header(header: str) -> bool:
    h = " ".join(header.split())
    if not h or "(" not in h:
        return False
    if "=" in h.split("(")[0] and not re.search(r"\boperator\b", h):
        return False  # an initialiser: `auto x = [..](..) {` or `T v = {`
    if SCOPE_WORDS.search(h.split("(")[0]) and not h.rstrip().endswith(")"):
        return False
    return True


def function_name(header: str) -> str:
    h = " ".join(header.split())
    depth, cut = 0, None
    for k, ch in enumerate(h):  # the first top-level '(' opens the parameter list
        if ch == "(" and depth == 0:
            cut = k
            break
        if ch == "<":
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
    m = NAME.search(h[: cut + 1]) if cut is not None else None
    return m.group(1) if m else h[:60]


def long_functions(path: pathlib.Path, limit: int):
    text = blank(path.read_text(encoding="utf-8", errors="replace"))
    line = 1
    header_start = 0
    stack = []  # per open brace: None, INIT, or (name, first line) for a function body
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            inside_function = any(s not in (None, INIT) for s in stack)
            header = text[header_start:i]
            if not inside_function and INIT_LIST_MEMBER.search(" ".join(header.split())):
                stack.append(INIT)  # `b_{x}` in a constructor's initialiser list
                continue
            if not inside_function and is_function_header(header):
                stack.append((function_name(header), line))
            else:
                stack.append(None)
            header_start = i + 1
        elif c == "}":
            if stack:
                top = stack.pop()
                if top is INIT:
                    continue  # the header goes on to the constructor's body
                if top is not None and line - top[1] + 1 > limit:
                    yield top[0], top[1], line - top[1] + 1
            header_start = i + 1
        elif c == ";":
            header_start = i + 1


def long_python_functions(path: pathlib.Path, limit: int):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                yield node.name, node.lineno, length


def self_test() -> int:
    """The counter finds a function one line over the limit and passes one at the limit."""
    import tempfile

    def body(lines: int) -> str:
        inner = "\n".join(f'  if (x) {{ s += "}}{i}"; }}  // {{' for i in range(lines - 2))
        return "{\n" + inner + "\n}\n"

    source = ("namespace n {\nstruct S {\n  int f(int x) const " + body(5) + "};\n"
              "int at_limit(int x) " + body(5) + "Foo::Foo(int x) : a_(x), b_{x} " + body(6) +
              "auto lambda = [](int x) " + body(9) + "}\n")
    with tempfile.TemporaryDirectory() as d:
        f = pathlib.Path(d) / "sample.cpp"
        f.write_text(source)
        found = [(name, length) for name, _, length in long_functions(f, 5)]
        py = pathlib.Path(d) / "sample.py"
        py.write_text("def at_limit():\n" + "    x = 1\n" * 4 + "\n\nclass C:\n    def over(self):\n"
                      + "        x = 1\n" * 5)
        found_py = [(name, length) for name, _, length in long_python_functions(py, 5)]
    if found != [("Foo::Foo", 6)]:
        print(f"self-test failed: found {found}, expected [('Foo::Foo', 6)]")
        return 1
    if found_py != [("over", 6)]:
        print(f"self-test failed: found {found_py} in Python, expected [('over', 6)]")
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=90, help="longest body allowed, in lines")
    parser.add_argument("paths", nargs="+", type=pathlib.Path)
    args = parser.parse_args()
    if self_test():
        return 2
    files = []
    for p in args.paths:
        if "*" in str(p):
            files += sorted(pathlib.Path(f) for f in glob.glob(str(p)))
        elif p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES)
        else:
            files.append(p)
    found = 0
    for f in files:
        check = long_python_functions if f.suffix == ".py" else long_functions
        for name, first, length in check(f, args.max):
            print(f"{f}:{first}: {name} is {length} lines (at most {args.max})")
            found += 1
    if found:
        print(f"{found} function(s) over {args.max} lines: split them into named steps")
        return 1
    print(f"no function over {args.max} lines in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
