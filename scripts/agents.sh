#!/usr/bin/env bash
# The real coding agents behind the proxy (bench/agents.py): installs the pinned Claude Code, Codex,
# OpenCode and Qwen Code from npm into .agents/ (when missing) and runs one long session of each, with and
# without the settings `context-guard agent-env` prints. Without npm it skips, unless
# GUARD_REQUIRE_AGENTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.331}"
CODEX_VERSION="${CODEX_VERSION:-0.169.0}"
OPENCODE_VERSION="${OPENCODE_VERSION:-1.18.33}"
QWEN_CODE_VERSION="${QWEN_CODE_VERSION:-0.24.4}"
if ! command -v npm >/dev/null 2>&1; then
  echo "agents: no npm here" >&2
  [ "${GUARD_REQUIRE_AGENTS:-0}" = 1 ] && exit 1
  exit 0
fi
install() {  # prefix package@version binary
  if [ ! -x "$1/node_modules/.bin/$3" ] || ! grep -q "\"version\": \"${2##*@}\"" "$1/node_modules/${2%@*}/package.json" 2>/dev/null; then
    npm install --silent --no-audit --no-fund --prefix "$1" "$2" >/dev/null
  fi
}
install .agents/cc "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" claude
install .agents/codex "@openai/codex@${CODEX_VERSION}" codex
install .agents/opencode "opencode-ai@${OPENCODE_VERSION}" opencode
install .agents/qwen "@qwen-code/qwen-code@${QWEN_CODE_VERSION}" qwen
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec "${GUARD_VENV:-.venv}/bin/python" -m bench.agents "$@"
