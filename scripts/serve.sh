#!/usr/bin/env bash
# Set up .venv and start the LiteLLM proxy with the guard on 127.0.0.1:${PORT:-4000}.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh proxy
export LITELLM_LOCAL_MODEL_COST_MAP=True
# with --num_workers N: uvicorn restarts a worker that has not answered its health check within 5 s,
# and one still importing LiteLLM on a small or busy machine cannot (docs/operations.md)
export TIMEOUT_WORKER_HEALTHCHECK="${TIMEOUT_WORKER_HEALTHCHECK:-60}"
if [ -z "${LITELLM_MASTER_KEY:-}" ]; then
  export LITELLM_MASTER_KEY="sk-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
  echo "LITELLM_MASTER_KEY=${LITELLM_MASTER_KEY}   (generated for this run; export your own to keep it)"
fi
exec .venv/bin/litellm --config proxy_config.yaml --host "${HOST:-127.0.0.1}" --port "${PORT:-4000}" "$@"
