#!/usr/bin/env bash
# scripts/check-format.sh [--fix] — every tracked C++ file must match
# .clang-format (clang-format 14, Debian's `clang-format`). Without --fix it
# lists the files that differ and exits non-zero; ./run tests runs it first.
# It also runs scripts/check-notes.py: every Note a dozen lines or fewer.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="$(command -v clang-format-14 || command -v clang-format)" ||
  { echo "check-format: clang-format not found; apt-get install clang-format" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format (scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format"
python3 scripts/check-notes.py
