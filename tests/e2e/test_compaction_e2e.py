"""Compaction through two real LiteLLM proxy replicas that share a real Redis.

A 50-turn agent loop crosses a 32k window several times; turns alternate between the replicas.
The strict upstream (tiktoken-counted) must accept every turn; the summarizer (a model of the
same upstream) is called at most once per crossing; a summary made by one replica is reused by
the other through Redis; team B never gets team A's summary; with Redis killed mid-run every turn
is still served.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import httpx
import openai
import pytest

from bench.traces import agent_trace
from tests.e2e.conftest import start_proxy, stop_proxy
from tests.e2e.redis_server import Redis, require_redis_server
from tests.e2e.upstream import is_summary_call

require_redis_server()

TRACE = agent_trace()
TURNS = list(range(200, 400, 4))  # 50 turns of a growing agent conversation


def config(upstream_port: int, redis_port: int) -> str:
    base = f"http://127.0.0.1:{upstream_port}/v1"
    return f"""
model_list:
  - model_name: agent
    litellm_params: {{model: openai/gpt-4o-32k, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 32768, max_output_tokens: 4096}}
  - model_name: summarizer
    litellm_params: {{model: openai/gpt-4o-summarizer, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 128000, max_output_tokens: 4096}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
general_settings:
  master_key: sk-master
  custom_auth: tests.e2e.auth.user_api_key_auth
  coordination_redis: {{host: 127.0.0.1, port: {redis_port}}}
context_guard:
  defaults:
    default_max_tokens: 1024
  summarizer:
    model: summarizer
    timeout_seconds: 30
"""


@pytest.fixture(scope="module")
def cluster(upstream: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], Redis]]:
    workdir = tmp_path_factory.mktemp("replicas")
    redis = Redis(workdir)
    redis.start()
    procs, urls = [], []
    for i in range(2):
        d = workdir / f"replica{i}"
        d.mkdir()
        proc, url, _ = start_proxy(config(upstream.port, redis.port), d)
        procs.append(proc)
        urls.append(url)
    yield urls, redis
    for proc in procs:
        stop_proxy(proc)
    redis.stop()


def _send(url: str, key: str, n: int) -> tuple[Any, dict[str, str]]:
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=120)
    raw = client.chat.completions.with_raw_response.create(
        model="agent", messages=json.loads(json.dumps(TRACE["messages"][:n]))
    )
    return raw.parse(), dict(raw.headers)


def _summary_calls(upstream: Any) -> list[dict]:
    with upstream.lock:
        return [r for r in upstream.requests if is_summary_call(r["body"])]


def test_two_replicas_share_summaries_through_redis_and_never_across_teams(cluster, upstream):
    urls, redis = cluster
    with upstream.lock:
        upstream.requests.clear()
    sources: list[str] = []
    for i, n in enumerate(TURNS):
        reply, headers = _send(urls[i % 2], "sk-team-a", n)  # alternate replicas
        assert reply.choices[0].message.content.startswith("ok:"), "the strict upstream refused a turn"
        sources.append(headers.get("x-context-guard-summary", "none").split(";")[0])
    with upstream.lock:
        agent_turns = [r for r in upstream.requests if not is_summary_call(r["body"])]
    assert len(agent_turns) == len(TURNS)
    assert all(r["input_tokens"] + r["body"]["max_tokens"] <= r["window"] for r in agent_turns)
    made = sources.count("llm")
    assert 2 <= made <= 6, sources  # the loop crossed the window several times, compacted once each
    assert len(_summary_calls(upstream)) == made  # one summarizer call per crossing, none per turn
    first = sources.index("llm")
    assert all(s in ("llm", "cache") for s in sources[first:]), "once compacted, every turn has the summary"
    # the turn after each crossing went to the other replica, whose memory never saw the summary:
    # its hit came from Redis
    after = [i + 1 for i, s in enumerate(sources) if s == "llm" and i + 1 < len(sources)]
    assert any(sources[i] == "cache" for i in after)
    assert len(redis.keys()) >= made

    # team B sends the very same conversation: it must get its own summary, never team A's
    calls = len(_summary_calls(upstream))
    _, headers = _send(urls[0], "sk-team-b", TURNS[-1])
    assert headers["x-context-guard-summary"].startswith("llm")
    assert len(_summary_calls(upstream)) == calls + 1


def test_every_turn_is_served_with_redis_killed_mid_run(cluster, upstream):
    urls, redis = cluster
    redis.stop()
    try:
        # a team whose summaries no replica holds in memory: its lookups go to Redis
        for i, n in enumerate(range(344, 404 + 4, 4)):
            reply, headers = _send(urls[i % 2], "sk-team-c", n)
            assert reply.choices[0].message.content.startswith("ok:")
            assert headers["x-context-guard-outcome"] == "fitted"
        metrics = httpx.get(urls[0] + "/metrics/", headers={"Authorization": "Bearer sk-master"}).text
        assert 'context_guard_summary_cache_total{op="get",result="error"}' in metrics
    finally:
        redis.start()
    reply, _ = _send(urls[1], "sk-team-c", TURNS[-1])  # and it recovers when Redis is back
    assert reply.choices[0].message.content.startswith("ok:")


def test_every_turn_is_served_with_the_summarizer_failing(cluster, upstream):
    urls, _ = cluster
    upstream.fail_summaries = True
    try:
        before = len(_summary_calls(upstream))
        for i, n in enumerate(TURNS[::5]):  # the master key is another tenant: no summary cached
            reply, headers = _send(urls[i % 2], "sk-master", n)
            assert reply.choices[0].message.content.startswith("ok:")
            assert headers["x-context-guard-outcome"] == "fitted"
            assert "summarize=" not in headers["x-context-guard-actions"]
        # at most failure_threshold (3) calls per replica: then its circuit is open
        assert len(_summary_calls(upstream)) - before <= 2 * 3
    finally:
        upstream.fail_summaries = False
