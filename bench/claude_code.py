"""Drive Claude Code itself through a real proxy with the guard (issue 14; not part of CI).

    ./scripts/agents.sh     # installs the pinned Claude Code into .agents/cc (~240 MB), runs bench.agents
    python -m bench.claude_code [--claude .agents/cc/node_modules/.bin/claude]

Three runs of `claude -p`, each against a strict upstream on 127.0.0.1 that enforces the window and
Anthropic's thinking rule (1024 <= budget_tokens < max_tokens):
1. the model capped at a 16,000-token output: every request Claude Code sends must reach the
   upstream valid (its 32,000 max_tokens with a 31,999 thinking budget are lowered together);
2. the same with a 2,048-token cap, below the thinking budget Claude Code asks for;
3. a window smaller than Claude Code's first request: the guard refuses before the upstream, and
   Claude Code reports the prompt as too long with the guard's numbers.
Prints one line per run with what the upstream received and what Claude Code said.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.agents import scratch
from tests.e2e.conftest import free_port, start_proxy, stop_proxy
from tests.e2e.upstream import serve

MODEL = "claude-cap"


def config(upstream_port: int, *, window: int, max_output: int) -> str:
    return f"""
model_list:
  - model_name: {MODEL}
    litellm_params: {{model: anthropic/claude-sonnet-4-5, api_base: "http://127.0.0.1:{upstream_port}", api_key: dummy}}
    model_info: {{max_input_tokens: {window}, max_output_tokens: {max_output}}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
general_settings:
  master_key: sk-master
"""


def run_claude(claude: str, proxy_url: str, prompt: str, thinking: int, home: Path) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(scratch(home)),  # (Claude Code's own scratch folders: inside the run's folder too)
        "ANTHROPIC_BASE_URL": proxy_url,
        "ANTHROPIC_API_KEY": "sk-master",
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        # the budget newer Claude Code versions send by default (max_tokens 32000, budget 31999)
        "MAX_THINKING_TOKENS": str(thinking),
    }
    return subprocess.run(
        [claude, "-p", prompt, "--model", MODEL],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def one_run(claude: str, label: str, *, window: int, max_output: int, thinking: int = 31999) -> dict:
    server, state = serve(free_port(), {"claude-sonnet-4-5": window})
    port = server.server_address[1]
    workdir = Path(tempfile.mkdtemp(prefix="cc-proxy-"))
    proc, url, log = start_proxy(config(port, window=window, max_output=max_output), workdir)
    try:
        result = run_claude(claude, url, "Reply with the single word: ready", thinking, workdir / "home")
    finally:
        stop_proxy(proc)
        server.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    bodies = [r["body"] for r in state.requests if r["path"].split("?")[0].endswith("/messages")]
    # what Claude Code said: its answer or error on stdout, else stderr's last line that is not one
    # of its own diagnostics ("[claude-code:...]", e.g. that it does not know a gateway's model name)
    said = result.stdout.strip().splitlines() or [
        line for line in result.stderr.strip().splitlines() if not line.startswith("[claude-code:")
    ]
    row = {
        "run": label,
        "upstream_requests": len(bodies),
        "max_tokens": sorted({b.get("max_tokens") for b in bodies}),
        "thinking_budgets": sorted(
            {(b.get("thinking") or {}).get("budget_tokens") for b in bodies if b.get("thinking")}
        ),
        "refused_for_thinking": state.stats.get("refused_thinking", 0),
        "refused_too_long": sum(state.stats["refused_too_long"].values()),
        "claude_exit": result.returncode,
        "claude_said": said[-1][:300] if said else "",
    }
    print(row, flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude", default=os.environ.get("CLAUDE_BIN", ".agents/cc/node_modules/.bin/claude"))
    args = parser.parse_args()
    claude = Path(args.claude).resolve()  # (Claude Code runs in its own home: a relative path would not resolve there)
    if not claude.exists():
        print(f"no Claude Code at {args.claude}: ./scripts/agents.sh installs it", file=sys.stderr)
        return 1
    capped = one_run(str(claude), "output cap 16000", window=200_000, max_output=16_000)
    # below the budget this Claude Code version sends (4096): the budget must come down with max_tokens
    tight = one_run(str(claude), "output cap 2048", window=200_000, max_output=2048)
    small = one_run(str(claude), "window 8192 (< first request)", window=8192, max_output=4096)
    ok = (
        all(
            r["upstream_requests"] > 0 and r["refused_for_thinking"] == 0 and r["claude_exit"] == 0
            for r in (capped, tight)
        )
        and small["upstream_requests"] == 0
        and "too long" in small["claude_said"].lower()
    )
    print("claude code bench:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
