#!/usr/bin/env python3
"""Lines of tether's non-test Rust: src/ and crates/*/src, leaving out test files
(`tests.rs`, `tests/`, `testing.rs`) and, in each file, an inline `#[cfg(test)] mod NAME {`
and what follows it (a `#[cfg(test)] mod NAME;` that names a file counts as a line).
Prints the lines with comments and blank lines, then without them.

    scripts/lines.py [CHECKOUT]      (default: this checkout)
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
crates = os.path.join(root, "crates")
bases = [os.path.join(root, "src")]
if os.path.isdir(crates):
    bases += [os.path.join(crates, c, "src") for c in sorted(os.listdir(crates))]


def non_test_lines(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i, line in enumerate(lines):
        if line.strip() != "#[cfg(test)]":
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j].strip().startswith("#[")):
            j += 1
        if j < len(lines) and re.match(r"\s*(pub(\(\w+\))?\s+)?mod\s+\w+\s*\{", lines[j]):
            return lines[:i]
    # A test module in a file of its own (`#[cfg(test)] mod tests;`) is one line here.
    return lines


everything = code = 0
for base in bases:
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != "tests"]
        for name in files:
            if not name.endswith(".rs") or name in ("tests.rs", "testing.rs"):
                continue
            for line in non_test_lines(os.path.join(folder, name)):
                everything += 1
                stripped = line.strip()
                if stripped and not stripped.startswith("//"):
                    code += 1
print(f"{everything} lines, {code} without comments and blank lines")
