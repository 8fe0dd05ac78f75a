#!/usr/bin/env bash
# Set-up of the browser tests (make test-browser): the OS's Chromium and playwright-core (npm) to drive it.
# Idempotent; not part of `make setup` (the default tests do not need a browser).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  echo "[setup-browser] installing chromium (apt)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -q && $SUDO apt-get install -y -q chromium
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  echo "[setup-browser] installing playwright-core (npm)"
  (cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
