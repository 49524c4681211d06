#!/usr/bin/env python3
"""scripts/check-notes.py [DIR ...] — every `Note [...]` comment is a dozen
lines or fewer (STYLE.md: the decision, why, and the one measurement that
settled it; the history goes to the commit message, docs/measurements.md or
benchmarks/README.md).

A Note is its title line (`// Note [Title]` or `# Note [Title]`), an optional
`~~~` underline, and the comment lines after it to the end of the comment
block or the next Note's title; empty comment lines at its end do not count.
So a comment that goes on after a Note starts a block of its own. Lists each Note over the limit with its length and
exits 1; checks the tracked C++, Python and CMake files under the given
directories (default: NOTE_DIRS below). Run by scripts/check-format.sh.
"""
import re
import subprocess
import sys

LIMIT = 12
# Every directory that holds Notes.
NOTE_DIRS = ["src", "include", "python", "tools", "examples", "benchmarks", "tests", "scripts", "fuzz"]
TITLE = re.compile(r"^\s*(//|#)\s*Note \[[^\]]+\]\s*$")


def notes(path):
    """(line number, title, body length) of each Note in `path`."""
    with open(path, errors="replace") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        m = TITLE.match(line)
        if not m:
            continue
        mark = m.group(1)
        j = i + 1
        if j < len(lines) and re.match(r"^\s*" + re.escape(mark) + r"\s*~+\s*$", lines[j]):
            j += 1
        n = blank = 0
        while j < len(lines):
            s = lines[j].strip()
            if not s.startswith(mark) or TITLE.match(lines[j]):
                break
            if s == mark:
                blank += 1
            else:
                n += 1 + blank
                blank = 0
            j += 1
        yield i + 1, line.strip(), n


def main(dirs):
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--"] + dirs, capture_output=True, text=True, check=True).stdout.split()
    files = [f for f in files if re.search(r"\.(cpp|h|hpp|cu|kern|py|cmake)$|CMakeLists\.txt$", f)]
    long_notes = [(f, ln, title, n) for f in files for ln, title, n in notes(f) if n > LIMIT]
    for f, ln, title, n in long_notes:
        print("%s:%d: %s is %d lines; a Note is at most %d (STYLE.md)" % (f, ln, title, n, LIMIT), file=sys.stderr)
    if long_notes:
        print("check-notes: %d Note(s) over %d lines" % (len(long_notes), LIMIT), file=sys.stderr)
        return 1
    print("check-notes: every Note under %s is %d lines or fewer" % (" ".join(dirs), LIMIT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or NOTE_DIRS))
