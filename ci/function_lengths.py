#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (default 80 lines), longest first.

A brace counter, not a parser: a function is a top-level-in-its-scope `{` whose
preceding text ends in `)` plus optional qualifiers (const, noexcept, override,
-> type, member initialisers), outside class/namespace/struct/enum bodies and
lambdas nested in a function (those count as part of it). Comments, strings and
character literals are blanked first so braces in them do not count.

Usage: ci/function_lengths.py [--max N] [DIR ...]   (default: engine sim scenarios)
Exit: 0 always (an audit, not a gate); prints `path:line: N lines: name`.
"""
import argparse
import pathlib
import re
import sys

SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{()]*$")


def blank(text):
    """Comments, strings and char literals replaced by spaces, newlines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # 10'000 is a number
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(path):
    text = blank(path.read_text(errors="replace"))
    stack = []  # entries: ("scope"|"func"|"block", start_line, name)
    line, last = 1, 0
    results = []
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            head = text[last:i]
            in_func = any(k == "func" for k, _, _ in stack)
            tail = head.strip()
            if in_func:
                stack.append(("block", line, ""))
            elif SCOPE_WORDS.search(tail.split(";")[-1]) or tail.endswith("=") or tail.endswith("extern \"C\""):
                stack.append(("scope", line, ""))
            elif re.search(r"\)\s*(const|noexcept|override|final|mutable|&|->[^;{}]*|:[^;{}]*)*\s*$", tail, re.S):
                m = re.search(r"([~\w:<>]+)\s*\([^;{}]*$", tail, re.S)
                stack.append(("func", line, m.group(1) if m else "?"))
            else:
                stack.append(("block", line, ""))
            last = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "func":
                    results.append((line - start + 1, start, name))
            last = i + 1
        elif c == ";":
            last = i + 1
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("dirs", nargs="*", default=["engine", "sim", "scenarios"])
    a = ap.parse_args()
    rows = []
    for d in a.dirs:
        for p in sorted(pathlib.Path(d).rglob("*")):
            if p.suffix in (".cpp", ".hpp", ".cu", ".cuh", ".h"):
                rows += [(n, str(p), s, name) for n, s, name in functions(p) if n > a.max]
    for n, p, s, name in sorted(rows, reverse=True):
        print(f"{p}:{s}: {n} lines: {name}")
    print(f"{len(rows)} functions over {a.max} lines", file=sys.stderr)


if __name__ == "__main__":
    main()
