"""A real LiteLLM proxy process with the guard, in front of a strict upstream on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.e2e.upstream import Upstream, serve

ROOT = Path(__file__).resolve().parents[2]
LITELLM = Path(sys.executable).parent / "litellm"
# "gpt-4o-undersized" is configured in the proxy with an 8k window the upstream does not honour:
# the guard's count is right but its limits are wrong, so the provider refuses (a counting miss)
WINDOWS = {
    "gpt-4o-8k": 8192,
    "gpt-4o-32k": 32768,
    "gpt-4o-2k": 2048,
    "claude-8k": 8192,
    "gpt-4o-undersized": 3000,
    "gpt-4o-16k": 16384,
    "gpt-4o-131k": 131072,
    "claude-cap": 200_000,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_config(upstream_port: int) -> str:
    base = f"http://127.0.0.1:{upstream_port}"
    return f"""
model_list:
  - model_name: small
    litellm_params: {{model: openai/gpt-4o-8k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
  - model_name: big
    litellm_params: {{model: openai/gpt-4o-32k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 32768, max_output_tokens: 4096}}
  - model_name: tiny-with-fallback
    litellm_params: {{model: openai/gpt-4o-2k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 2048, max_output_tokens: 512}}
  - model_name: claude-small
    litellm_params: {{model: anthropic/claude-8k, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
  - model_name: small-chat-only
    litellm_params: {{model: openai/gpt-4o-8k, api_base: "{base}/v1", api_key: dummy, use_chat_completions_api: true}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
  - model_name: undersized
    litellm_params: {{model: openai/gpt-4o-undersized, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
litellm_settings:
  callbacks: [guard.proxy.context_guard, tests.e2e.recorder.recorder, tests.e2e.contract_probe.probe]
  num_retries: 0
  context_window_fallbacks: [{{"tiny-with-fallback": ["big"]}}]
general_settings:
  master_key: sk-master
  custom_auth: tests.e2e.auth.user_api_key_auth
context_guard:
  defaults:
    default_max_tokens: 512
    keep_recent_groups: 2
  teams:
    team-a: {{max_output_tokens: 128}}
"""


class Proxy:
    def __init__(self, url: str, upstream: Upstream, log: Path, events: Path, contract_log: Path | None = None) -> None:
        self.url = url
        self.upstream = upstream
        self.log = log
        self.events = events
        self.contract_log = contract_log  # what tests/e2e/contract_probe.py saw of LiteLLM's hooks

    def reset(self) -> None:
        with self.upstream.lock:
            self.upstream.requests.clear()

    @property
    def received(self) -> list[dict]:
        with self.upstream.lock:
            return list(self.upstream.requests)


def start_proxy(
    config_text: str,
    workdir: Path,
    env_extra: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    args: list[str] | None = None,
) -> tuple[subprocess.Popen, str, Path]:
    cfg = workdir / "proxy_config.yaml"
    cfg.write_text(config_text)
    port = free_port()
    log = workdir / f"proxy-{port}.log"
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOG": "ERROR",
        # uvicorn kills a worker that has not answered its health check within 5 s and starts another:
        # two multi-worker proxies starting at once on 2 cores never got a worker through LiteLLM's
        # import (a new worker every ~10 s, none ready after 240 s)
        "TIMEOUT_WORKER_HEALTHCHECK": "120",
        **(env_extra or {}),
    }
    proc = subprocess.Popen(
        [
            *(prefix or []),
            str(LITELLM),
            "--config",
            str(cfg),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            *(args or []),
        ],
        cwd=workdir,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: `stop_proxy` stops its workers with it
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 240  # two workers on a loaded 2-core machine took over 120 s once
    while time.time() < deadline:
        if proc.poll() is not None:
            stop_proxy(proc)  # workers it may have left
            raise RuntimeError(f"proxy exited: {log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health/liveliness", timeout=1).status_code == 200:
                return proc, url, log
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_proxy(proc)
    raise RuntimeError(f"proxy did not start: {log.read_text()[-3000:]}")


def stop_proxy(proc: subprocess.Popen) -> None:
    """Stop a proxy started by `start_proxy` and its workers: terminate its process group, then kill
    what is left of it (a worker its supervisor left behind kept importing LiteLLM and serving,
    starving the next multi-worker proxy of CPU on a 2-core machine)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="session")
def upstream() -> Iterator[Upstream]:
    server, state = serve(free_port(), WINDOWS)
    state.port = server.server_address[1]  # type: ignore[attr-defined]
    yield state
    server.shutdown()


@pytest.fixture(scope="session")
def proxy(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    workdir = tmp_path_factory.mktemp("proxy")
    events = workdir / "events.jsonl"
    events.touch()
    contract = workdir / "contract.jsonl"
    env = {"GUARD_E2E_LOG": str(events), "GUARD_E2E_CONTRACT_LOG": str(contract)}
    proc, url, log = start_proxy(proxy_config(upstream.port), workdir, env)  # type: ignore[attr-defined]
    yield Proxy(url, upstream, log, events, contract)
    stop_proxy(proc)
