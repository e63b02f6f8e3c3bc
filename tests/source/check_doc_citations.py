#!/usr/bin/env python3
"""Checks that every section of the docs cited in the tree exists.

A citation is `docs/X.md "Section"` or `docs/X.md, "Section"` in code, tests, build files, Python
files and the docs themselves, also when a comment wraps it over lines (`// docs/X.md, "A
section"`). It is valid when docs/X.md exists and has a heading (a `#` line outside code fences)
that the section names: the heading's text, without its number ("2. ") and backquotes, is the
section or begins with it and goes on after a word break, as the docs' headings carry a subtitle
or the files they describe ("Partitions" names "### Partitions (`cpu::Partition`, ...)",
"Progress model" names "## Progress model and thread level"). A citation without a section only
needs the file to exist.

Usage: check_doc_citations.py ROOT   (prints each broken citation as file:line, exits 1 if any)
"""
import bisect
import pathlib
import re
import sys

# Where citations are looked for: folders (recursively) and single files, relative to ROOT.
FOLDERS = ["include", "src", "tools", "bench", "tests", "examples", "fuzz", "python", "cmake",
           "docs"]
FILES = ["README.md", "CMakeLists.txt", "Makefile", "setup.py", "pyproject.toml"]
SUFFIXES = {".cpp", ".hpp", ".h", ".cc", ".py", ".pyi", ".md", ".txt", ".cmake", ".sh", ".toml",
            ".cfg"}
# Between the path and the quoted section: spaces, line breaks and the comment markers that start
# a continued line.
GAP = r"(?:[ \t]|\n[ \t]*(?://+!?|#+|\*(?!/))?)*"
# `docs/` starts the citation: `${ROOT}/docs/x.md "..."` is a path given to a command, not one.
CITATION = re.compile(r"(?<![\w/.}-])docs/([\w./-]+\.md)(,?)(" + GAP +
                      r")(\"([^\"\n]|\n(?!\s*\n)){1,200}?\")?")
CONTINUATION = re.compile(r"[ \t]*\n[ \t]*(?://+!?|#+|\*(?!/))?[ \t]*")
# In code, a quoted section can sit in C string literals: `"(docs/x.md, \"Exit\")"`, or
# `"... (docs/x.md, "` and `"\"Exit\")"` on the next line.
LITERAL_JOIN = re.compile(r'"[ \t]*\n\s*"|\\"')
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)*\.?\s+")


def headings(doc: pathlib.Path):
    """The heading texts of a markdown file, code fences skipped, inline markup kept as text."""
    found, fenced = [], False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            found.append(m.group(2).replace("`", ""))
    return found


def names_heading(section: str, titles) -> bool:
    section = section.replace("`", "")
    for t in titles:
        t = NUMBER.sub("", t)
        if t == section or (t.startswith(section) and not t[len(section)].isalnum()):
            return True
    return False


def sources(root: pathlib.Path):
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and (path.suffix in SUFFIXES or path.name == "CMakeLists.txt"):
                yield path
    for name in FILES:
        if (root / name).is_file():
            yield root / name


def unquoted(text: str):
    """`text` with adjacent string literals joined and escaped quotes plain, and for each place
    where it was cut, (offset in the result, lines dropped before it)."""
    out, cuts, last, dropped = [], [], 0, 0
    for m in LITERAL_JOIN.finditer(text):
        out.append(text[last:m.start()])
        if m.group() != '\\"':
            dropped += m.group().count("\n")
        else:
            out.append('"')
        last = m.end()
        cuts.append((sum(map(len, out)), dropped))
    out.append(text[last:])
    return "".join(out), cuts


def broken_citations(root: pathlib.Path):
    cache = {}
    me = pathlib.Path(__file__).resolve()
    for path in sources(root):
        if path.resolve() == me:
            continue  # its documentation and self-test show citations, valid and broken
        text = path.read_text(encoding="utf-8", errors="replace")
        cuts = []
        if path.suffix != ".md":
            text, cuts = unquoted(text)
        for m in CITATION.finditer(text):
            doc = root / "docs" / m.group(1)
            k = bisect.bisect_right(cuts, (m.start(), float("inf")))
            line = text.count("\n", 0, m.start()) + 1 + (cuts[k - 1][1] if k else 0)
            where = f"{path.relative_to(root)}:{line}"
            if not doc.is_file():
                yield f"{where}: docs/{m.group(1)} does not exist"
                continue
            if m.group(4) is None:
                continue
            section = CONTINUATION.sub(" ", m.group(4)[1:-1]).strip()
            if doc not in cache:
                cache[doc] = headings(doc)
            if not names_heading(section, cache[doc]):
                yield f"{where}: docs/{m.group(1)} has no heading \"{section}\""


def self_test() -> int:
    """A wrapped citation of an existing heading passes, also in joined string literals; a
    missing heading and a missing file do not."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "docs").mkdir()
        (root / "src").mkdir()
        (root / "docs" / "a.md").write_text(
            "# A\n\n## 2. How the figures are taken\n```\n# Not\n```\n")
        (root / "src" / "x.cpp").write_text(
            '// see docs/a.md, "How the\n// figures are taken"; docs/a.md "How the fig"\n'
            '// docs/a.md "Not" and docs/b.md\n')
        (root / "src" / "y.cpp").write_text(
            'f("(docs/a.md, \\"How the figures are taken\\") or (docs/a.md, "\n'
            '  "\\"Gone\\")");\n')
        found = [b.split(": ", 1)[1] if "x.cpp" in b else b.split("src/", 1)[1]
                 for b in broken_citations(root)]
    want = ['docs/a.md has no heading "How the fig"', 'docs/a.md has no heading "Not"',
            "docs/b.md does not exist", 'y.cpp:1: docs/a.md has no heading "Gone"']
    if found != want:
        print(f"self-test failed: found {found}, expected {want}")
        return 1
    return 0


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if self_test():
        return 2
    broken = list(broken_citations(pathlib.Path(sys.argv[1])))
    for b in broken:
        print(b)
    if broken:
        print(f"{len(broken)} citation(s) of a doc or section that does not exist")
        return 1
    print("every docs/X.md \"Section\" cited in the tree names an existing heading")
    return 0


if __name__ == "__main__":
    sys.exit(main())
