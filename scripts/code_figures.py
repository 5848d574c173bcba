#!/usr/bin/env python3
"""The code's shape in numbers, for the structural issues' before/after:
public headers (the user's and the backend author's), their classes,
enums and exported functions, and the functions of src/ longer than 50
and 70 lines.  Usage: python3 scripts/code_figures.py [--long N]
(--long lists the functions over N lines, longest first)."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def strip(text):
    """Comments, string and character literals blanked (newlines kept)."""
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
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;(){}]*$")


def functions(path):
    """(name, first line, lines) of each function body at namespace or class scope."""
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    stack, found, last = [], [], 0
    for i, c in enumerate(text):
        if c in ";}":
            if c == "}" and stack:
                kind, start_line, name = stack.pop()
                if kind == "function" and all(k == "scope" for k, _, _ in stack):
                    end_line = text.count("\n", 0, i) + 1
                    found.append((name, start_line, end_line - start_line + 1))
            last = i + 1
        elif c == "{":
            head = text[last:i]
            in_function = any(k == "function" for k, _, _ in stack)
            if not in_function and SCOPE.search(head.strip()) and ")" not in head:
                stack.append(("scope", 0, ""))
            elif not in_function and ")" in head and "=" not in head.split("(")[0]:
                names = re.findall(r"([\w:~]+)\s*\(", head)
                stack.append(("function", text.count("\n", 0, i) + 1, names[0] if names else "?"))
            else:
                stack.append(("block", 0, ""))
            last = i + 1
    return found


def public_api(folder, exclude=()):
    headers = []
    for base, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if os.path.join(base, d) not in exclude]
        headers += [os.path.join(base, f) for f in files if f.endswith(".h")]
    classes = enums = funcs = 0
    for h in headers:
        t = strip(open(h).read())
        classes += len(re.findall(r"^\s*(?:class|struct)\s+(?:FLEETCRON_API\s+)?\w+\s*(?:final\s*)?(?::[^;{]*)?\{", t, re.M))
        enums += len(re.findall(r"\benum\s+class\s+\w+", t))
        funcs += len(re.findall(r"^(?:\[\[nodiscard\]\]\s*)?FLEETCRON_API\s+(?!class|struct)[^;]*?\b\w+\s*\(", t, re.M))
    return len(headers), classes, enums, funcs


def main():
    include = os.path.join(ROOT, "include", "fleetcron")
    backend = os.path.join(include, "backend")
    user = public_api(include, exclude=(backend,))
    author = public_api(backend)
    print(f"public headers, the user's:            {user[0]} ({user[1]} classes and structs, {user[2]} enums, {user[3]} exported functions)")
    print(f"public headers, the backend author's:  {author[0]} ({author[1]} classes and structs, {author[2]} enums, {author[3]} exported functions)")
    all_functions = []
    for base, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if f.endswith((".cpp", ".h")):
                path = os.path.join(base, f)
                all_functions += [(lines, os.path.relpath(path, ROOT), line, name) for name, line, lines in functions(path)]
    print(f"functions in src/: {len(all_functions)}; over 50 lines: {sum(1 for f in all_functions if f[0] > 50)}; "
          f"over 70 lines: {sum(1 for f in all_functions if f[0] > 70)}")
    if "--long" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--long") + 1])
        for lines, path, line, name in sorted(all_functions, reverse=True):
            if lines > limit:
                print(f"  {lines:4} {path}:{line} {name}")


if __name__ == "__main__":
    main()
