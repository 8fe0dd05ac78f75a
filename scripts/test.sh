#!/usr/bin/env bash
# The test suite: set-up (idempotent), then pytest, offline, on every CPU. Extra arguments go to pytest.
# pytest's exit 5 ("no tests collected") is a failure here, never a silent pass.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# One pytest worker per CPU (pytest-xdist; work stealing evens out the long bench and training
# tests). TEST_WORKERS=1 runs everything in this one process, TEST_WORKERS=<n> picks the count.
workers=${TEST_WORKERS:-auto}
parallel=()
[ "$workers" = 1 ] || parallel=(-n "$workers" --dist worksteal)
.venv/bin/python -m pytest "${parallel[@]}" "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
