#!/usr/bin/env bash
# Set up .venv and run the whole test suite (property tests: CI's share of 250 examples each;
# HYPOTHESIS_PROFILE=full for 1,000, deep for 10,000).
#
# The end-to-end tests use real parts: Debian's redis-server (installed here when missing and we
# may use apt) and a local LLM (llama.cpp + Gemma 3 270M, the local-llm extra). Without them
# those tests are skipped, unless GUARD_REQUIRE_REDIS=1 / GUARD_REQUIRE_LOCAL_LLM=1 (CI sets both).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) \
    || echo "warning: could not install redis-server; the Redis tests will be skipped" >&2
fi
./scripts/setup.sh "${GUARD_EXTRAS:-proxy,test,local-llm,exact}"
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec "${GUARD_VENV:-.venv}/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" -q --durations=15 "$@"
