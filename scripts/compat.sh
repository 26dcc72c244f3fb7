#!/usr/bin/env bash
# The compatibility run: the guard installed next to a LiteLLM a team already runs, then the
# end-to-end subset that exercises every hook and route (proxy chat, Anthropic messages, Responses,
# routing and fallbacks, SDK sync and async, calibration, LiteLLM's hook contract) and the tests of
# LiteLLM's model map.
#
#   ./scripts/compat.sh                                 # the lowest release of the tested range
#   GUARD_LITELLM_VERSION=1.108.7 ./scripts/compat.sh   # any other release
#   GUARD_LITELLM_VERSION=1.110.2 GUARD_COMPAT=sdk ./scripts/compat.sh   # the SDK alone (no proxy extra)
#
# It installs litellm[proxy]==VERSION (litellm==VERSION with GUARD_COMPAT=sdk: releases whose proxy
# extra this registry cannot install, such as 1.110's, which needs a `litellm-proxy` package) into
# .venv-compat-VERSION/ first, then the guard, and fails if pip moved LiteLLM: the guard's range
# must keep the gateway's release. With GUARD_COMPAT=sdk the subset is the SDK's: the SDK hooks and
# wrappers, token counting and LiteLLM's model map (the proxy's tests need the proxy extra); there
# LiteLLM is installed with its `mcp` extra, which its Rust core's request checks import (without it
# every call falls back to Python and LITELLM_RUST would test nothing).
# Then the hook contract again with LITELLM_RUST=true (where the release has a Rust core, its tests
# assert the core served the call).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${GUARD_LITELLM_VERSION:-1.102.4}"
mode="${GUARD_COMPAT:-proxy}"
venv=".venv-compat-${version}"
[ -x "${venv}/bin/python" ] || python3 -m venv "${venv}"
pip=("${venv}/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip >/dev/null
if [ "${mode}" = sdk ]; then
  "${pip[@]}" "litellm[mcp]==${version}"
  "${pip[@]}" -e ".[test]"
else
  "${pip[@]}" "litellm[proxy]==${version}"
  "${pip[@]}" -e ".[proxy,test]"
fi
installed="$("${venv}/bin/python" -c 'from importlib.metadata import version; print(version("litellm"))')"
if [ "${installed}" != "${version}" ]; then
  echo "compat: installing the guard moved LiteLLM from ${version} to ${installed}" >&2
  exit 1
fi
export LITELLM_LOCAL_MODEL_COST_MAP=True
if [ "${mode}" = sdk ]; then
  echo "compat: LiteLLM ${installed} kept (SDK only: the proxy extra is not installed, its tests are not run); running the SDK subset"
  "${venv}/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" -q -p no:cacheprovider \
    tests/e2e/test_sdk.py tests/test_model_parity.py tests/test_limits.py \
    tests/test_public_api.py "$@"
  echo "compat: LiteLLM ${installed}, the SDK's hook contract with LITELLM_RUST=true"
  exec env LITELLM_RUST=true "${venv}/bin/python" -m pytest -q -p no:cacheprovider tests/e2e/test_hook_contract.py \
    --deselect tests/e2e/test_hook_contract.py::test_the_proxy_sends_what_its_hooks_return_on_every_route "$@"
fi
echo "compat: LiteLLM ${installed} kept; running the end-to-end subset"
# (left out: /metrics summed over two proxy workers, telemetry rather than a hook. On a loaded
# 2-core machine uvicorn's supervisor kills a worker still importing LiteLLM when it misses its
# 5 s health check, with 1.106.2 as with 1.102.4 and without the guard; in the compatibility run
# one worker then served every request)
"${venv}/bin/python" -m pytest -n "${PYTEST_WORKERS:-2}" -q -p no:cacheprovider \
  tests/e2e/test_hook_contract.py tests/e2e/test_unguarded.py tests/e2e/test_proxy.py tests/e2e/test_responses.py tests/e2e/test_routing.py \
  tests/e2e/test_sdk.py tests/e2e/test_calibration_e2e.py tests/e2e/test_token_counting.py tests/test_model_parity.py tests/test_limits.py \
  tests/test_public_api.py --deselect tests/e2e/test_routing.py::test_metrics_add_up_across_proxy_workers "$@"
echo "compat: LiteLLM ${installed}, the hook contract with LITELLM_RUST=true"
exec env LITELLM_RUST=true "${venv}/bin/python" -m pytest -q -p no:cacheprovider tests/e2e/test_hook_contract.py "$@"
