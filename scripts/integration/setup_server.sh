#!/usr/bin/env bash
# Idempotent install of SkyRL tx (an open Tinker-API server) in its own virtual environment,
# .venv-skyrl (it needs transformers<5, so it cannot share .venv). Skipped when its stamp matches.
# CPU only: CPU torch first (else peft pulls multi-GB CUDA wheels), plain jax (its `jax` extra pins
# jax[cuda12]), and a `uv` shim, because the API process launches its engine with `uv run`.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=${SKYRL_VENV:-.venv-skyrl}
SKYRL_VERSION=0.3.0
# The bridge decodes the SDK's protobuf with the server venv's copy of tinker: use the same version.
TINKER_VERSION=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("tinker"))' 2>/dev/null || echo 0.38.0)
if [ ! -x "$VENV/bin/python" ]; then
  echo "[integration] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.turngym-installed"
want="$( (cat scripts/integration/setup_server.sh; echo "$TINKER_VERSION") | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[integration] installing skyrl-tx==$SKYRL_VERSION into $VENV (first run: ~3 min, ~2.3 GB)"
  PIP="$VENV/bin/python -m pip"
  $PIP install -q "torch==2.13.0" || $PIP install -q torch --index-url https://download.pytorch.org/whl/cpu
  $PIP install -q "jax>=0.8,<1.0" "flax>=0.12.2" "optax>=0.2.5"
  $PIP install -q "skyrl-tx[tinker]==$SKYRL_VERSION" "tinker==$TINKER_VERSION"
  echo "$want" > "$stamp"
fi
# `uv run [uv options] -m module args...` -> the venv's python -m module args...
mkdir -p "$VENV/shim"
cat > "$VENV/shim/uv" <<SHIM
#!/usr/bin/env bash
# Stand-in for \`uv run --extra ... -m module args\` (SkyRL tx starts its engine that way).
[ "\${1:-}" = run ] && shift
while [ \$# -gt 0 ] && [ "\$1" != -m ]; do
  case "\$1" in --extra|--with|--group|--project|--directory) shift 2 ;; *) shift ;; esac
done
exec "$(cd "$VENV" && pwd)/bin/python" "\$@"
SHIM
chmod +x "$VENV/shim/uv"
