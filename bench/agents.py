"""Real coding agents behind the proxy, in a long session, with and without `agent-env` (issue 25; CI runs it).

    npm install --prefix .agents/cc @anthropic-ai/claude-code@2.1.331    # a ~400 MB native binary
    npm install --prefix .agents/codex @openai/codex@0.169.0
    npm install --prefix .agents/opencode opencode-ai@1.18.33
    npm install --prefix .agents/qwen @qwen-code/qwen-code@0.24.4
    python -m bench.agents [--claude PATH] [--codex PATH] [--opencode PATH] [--qwen PATH] [--files 30]

Each agent is asked to read `--files` workspace files (~3.4k tokens each) one at a time through the
proxy, whose guarded model `gw-coder` has a 64k window and an 8,192-token output cap: the session
grows far past the window. The model is scripted (bench/agent_upstream.py, on 127.0.0.1): it calls
the agent's read tool for the next file, answers the agent's own compaction request with a summary,
and ends with a final text once every file was read. Two runs per agent:

- `agent-env`: the settings `context-guard agent-env AGENT --config ... --model gw-coder` prints.
  Wanted: the agent compacts on its own, no request reaches the provider with a guard cut, nothing
  is refused, the agent finishes.
- `plain`: the agent is not told the window (it assumes its own default). Wanted: the guard fits
  every request (cuts, no refusal) and the agent still finishes.

Prints one row per run and PASS/FAIL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from bench.agent_upstream import serve, write_workspace
from tests.e2e.conftest import ROOT, free_port, start_proxy, stop_proxy

MODEL = "gw-coder"
WINDOW = 65_536
MAX_OUTPUT = 8_192
TOKENS_PER_FILE = 3_400


def scratch(home: Path) -> Path:
    """A temporary folder in the agent's home (the run's folder, removed after it)."""
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def config(upstream_port: int, backend: str) -> str:
    return f"""
model_list:
  - model_name: {MODEL}
    litellm_params: {{model: {backend}, api_base: "http://127.0.0.1:{upstream_port}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: {WINDOW}, max_output_tokens: {MAX_OUTPUT}}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
general_settings:
  master_key: sk-master
"""


def agent_env(agent: str, cfg: Path, base_url: str) -> tuple[list[str], dict[str, str]]:
    """The lines `context-guard agent-env` prints (the real CLI), and the exports among them."""
    cli = shutil.which("context-guard", path=str(Path(sys.executable).parent)) or "context-guard"
    out = subprocess.run(
        [cli, "agent-env", agent, "--config", str(cfg), "--model", MODEL, "--base-url", base_url],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    ).stdout.splitlines()
    exports = dict(re.findall(r"^export (\w+)=(.*)$", "\n".join(out), re.M))
    return out, exports


def guard_outcomes(url: str) -> dict[str, int]:
    """context_guard_requests_total by outcome, from the proxy's /metrics."""
    text = httpx.get(url + "/metrics/", headers={"authorization": "Bearer sk-master"}, timeout=10).text
    out: dict[str, int] = {}
    for m in re.finditer(r'^context_guard_requests_total\{[^}]*outcome="(\w+)"[^}]*\} ([0-9.e+]+)$', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + int(float(m.group(2)))
    return out


def _run(argv: list[str], env: dict[str, str], work: Path) -> subprocess.CompletedProcess[str]:
    """The agent's non-interactive run in the workspace, its output captured (30 minutes at most)."""
    return subprocess.run(
        argv, env=env, cwd=work, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL
    )


def run_claude(
    claude: str, url: str, work: Path, settings: dict[str, str], files: int, home: Path
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(scratch(home)),  # (Claude Code's own scratch folders: inside the run's folder too)
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-master",
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "MAX_THINKING_TOKENS": "0",
        **settings,
    }
    prompt = (
        f"Read the files f01.txt to f{files:02d}.txt in this directory one at a time with the Read tool, then say done."
    )
    return _run([claude, "-p", prompt, "--model", MODEL, "--allowedTools", "Read"], env, work)


def run_codex(
    codex: str, url: str, work: Path, toml: list[str], files: int, home: Path
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(toml) + "\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "TMPDIR": str(scratch(home)),
        "LITELLM_API_KEY": "sk-master",
        "RUST_LOG": "error",
    }
    prompt = f"Read the files f01.txt to f{files:02d}.txt in this directory one at a time with cat, then say done."
    return _run(
        [codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", str(work), prompt],
        env,
        work,
    )


def codex_toml(printed: list[str], told: bool) -> list[str]:
    """The config.toml `agent-env codex` printed; without the limits when the agent is not told."""
    limits = ("model_context_window", "model_auto_compact_token_limit", "model_max_output_tokens")
    return [line for line in printed if told or not line.startswith(limits)]


def opencode_json(printed: list[str], told: bool) -> dict[str, Any]:
    """The opencode.json `agent-env opencode` printed; without the model's limits when the agent is
    not told (OpenCode then knows no window for the name, and never compacts on its own)."""
    config: dict[str, Any] = json.loads("\n".join(printed))
    if not told:
        for model in config["provider"]["context-guard"]["models"].values():
            model.pop("limit", None)
    return config


def run_opencode(
    opencode: str, url: str, work: Path, config: dict[str, Any], files: int, home: Path
) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "opencode.json").write_text(json.dumps(config))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(scratch(home)),
        "OPENCODE_CONFIG": str(home / "opencode.json"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "LITELLM_API_KEY": "sk-master",
    }
    prompt = (
        f"Read the files f01.txt to f{files:02d}.txt in this directory one at a time with the read tool, then say done."
    )
    return _run([opencode, "run", prompt], env, work)


def qwen_settings(printed: list[str], told: bool) -> dict[str, Any]:
    """The settings.json `agent-env qwen-code` printed (without the window, the output cap, the
    compaction point and the files it puts back when the agent is not told: it then takes 200k for
    a name it does not know), and what keeps a bench run to the model's own calls: no usage
    statistics, telemetry, update check or IDE, and no memory subagent (a background call after
    every prompt)."""
    config: dict[str, Any] = json.loads("\n".join(printed))
    if not told:
        for key in ("generationConfig", "chatCompression"):
            config["model"].pop(key, None)
        config.pop("context")
    quiet = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        "ide": {"enabled": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
        "tools": {"webSearch": {"enabled": False}},
    }
    return {**config, **quiet}


def run_qwen(
    qwen: str, url: str, work: Path, settings: dict[str, Any], files: int, home: Path
) -> subprocess.CompletedProcess[str]:
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "QWEN_HOME": str(home / ".qwen"),
        "TMPDIR": str(scratch(home)),
        "OPENAI_API_KEY": "sk-master",
        "QWEN_USAGE_STATISTICS_ENABLED": "false",
        "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    }
    prompt = (
        f"Read the files f01.txt to f{files:02d}.txt in this directory one at a time with the read_file tool, "
        "then say done."
    )
    return _run([qwen, "--approval-mode", "yolo", prompt], env, work)


def one_run(agent: str, binary: str, label: str, files: int, told: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"{agent}-work-"))
    paths = write_workspace(work, files, TOKENS_PER_FILE)
    server, script = serve(free_port(), {"claude-sonnet-4-5": WINDOW, "coder-64k": WINDOW}, paths)
    backend = "anthropic/claude-sonnet-4-5" if agent == "claude-code" else "openai/coder-64k"
    proxy_dir = Path(tempfile.mkdtemp(prefix=f"{agent}-proxy-"))
    proc, url, _log = start_proxy(config(server.server_address[1], backend), proxy_dir)
    try:
        printed, exports = agent_env(agent, proxy_dir / "proxy_config.yaml", url)
        if agent == "claude-code":
            settings: Any = {k: v for k, v in exports.items() if k.startswith("CLAUDE_CODE_")} if told else {}
            result = run_claude(binary, url, work, settings, files, proxy_dir / "home")
        elif agent == "opencode":
            settings = opencode_json(printed, told)
            result = run_opencode(binary, url, work, settings, files, proxy_dir / "home")
            settings = settings["provider"]["context-guard"]["models"][MODEL].get("limit", {})
        elif agent == "qwen-code":
            settings = qwen_settings(printed, told)
            result = run_qwen(binary, url, work, settings, files, proxy_dir / "home")
            told_window = settings["model"].get("generationConfig", {})
            settings = {**told_window, **settings["model"].get("chatCompression", {}), **settings.get("context", {})}
        else:
            settings = codex_toml(printed, told)
            result = run_codex(binary, url, work, settings, files, proxy_dir / "home")
            settings = [line for line in settings if line.startswith("model_")]
        outcomes = guard_outcomes(url)
    finally:
        stop_proxy(proc)
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(proxy_dir, ignore_errors=True)
    said = result.stdout.strip().splitlines() or result.stderr.strip().splitlines()
    row = {
        "agent": agent,
        "run": label,
        **script.stats(),
        "guard": outcomes,
        "settings": settings,
        "exit": result.returncode,
        "said": said[-1][:200] if said else "",
    }
    print(row, flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--claude", default=os.environ.get("CLAUDE_BIN", str(ROOT / ".agents/cc/node_modules/.bin/claude"))
    )
    parser.add_argument(
        "--codex", default=os.environ.get("CODEX_BIN", str(ROOT / ".agents/codex/node_modules/.bin/codex"))
    )
    parser.add_argument(
        "--opencode",
        default=os.environ.get("OPENCODE_BIN", str(ROOT / ".agents/opencode/node_modules/.bin/opencode")),
    )
    parser.add_argument("--qwen", default=os.environ.get("QWEN_BIN", str(ROOT / ".agents/qwen/node_modules/.bin/qwen")))
    parser.add_argument("--only", choices=["claude-code", "codex", "opencode", "qwen-code"])
    parser.add_argument("--files", type=int, default=30)
    args = parser.parse_args()
    rows = []
    agents = (
        ("claude-code", args.claude),
        ("codex", args.codex),
        ("opencode", args.opencode),
        ("qwen-code", args.qwen),
    )
    for agent, binary in agents:
        if args.only and agent != args.only:
            continue
        if not Path(binary).exists():
            print(f"no {agent} at {binary}: see the install lines at the top of bench/agents.py", file=sys.stderr)
            continue
        rows.append(one_run(agent, binary, "agent-env", args.files, told=True))
        rows.append(one_run(agent, binary, "plain", args.files, told=False))
    ok = bool(rows)
    for r in rows:
        done = (
            r["exit"] == 0
            and r["files_read"] == args.files
            and "done" in r["said"]
            and r["refused_too_long"] == 0
            and not r["guard"].get("rejected")
        )
        if r["run"] == "agent-env":  # the agent kept under the guard's limits by compacting itself
            done = done and r["agent_compactions"] > 0 and r["guard_cut_requests"] == 0
        else:  # the agent never compacted: the guard cut for it
            done = done and r["guard_cut_requests"] > 0
        ok = ok and done
    print("agents bench:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
