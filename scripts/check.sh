#!/usr/bin/env bash
# Every check, in the order a reviewer would run them: lint, format, types, tests.
# The default test suite skips tests marked slow; run those with: python -m pytest -m slow
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check autotune tests bench
ruff format --check autotune tests bench
mypy
mypy bench
python -m pytest -q "$@"
