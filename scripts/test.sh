#!/usr/bin/env bash
# Set up .venv and run the whole test suite (property tests at 1,000 examples each).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh proxy,test
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" -q "$@"
