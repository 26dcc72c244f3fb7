"""The guard inside a real LiteLLM proxy process, driven by the OpenAI and Anthropic SDKs."""

from __future__ import annotations

import json
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from bench.traces import agent_trace, blank_png, to_anthropic

CANARY = "zqxcanary"


def client(proxy, key: str = "sk-master") -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url, api_key=key, max_retries=0, timeout=120)


def overflowing(turns: int = 40, model: str = "small") -> dict[str, Any]:
    body = agent_trace(turns=turns, seed=turns, scale=0.05)
    body["messages"][1]["content"] += f" {CANARY}"
    body["messages"].append({"role": "user", "content": f"So what broke? {CANARY}"})
    body.pop("tools")
    return {**body, "model": model}


def last_upstream(proxy) -> dict[str, Any]:
    received = proxy.received
    assert received, "the upstream received nothing"
    return received[-1]


def test_an_overflowing_agent_conversation_is_fitted_and_accepted(proxy):
    proxy.reset()
    body = overflowing()
    resp = client(proxy).chat.completions.with_raw_response.create(
        model="small", messages=body["messages"], max_tokens=300
    )
    assert resp.http_response.status_code == 200
    got = last_upstream(proxy)
    assert len(proxy.received) == 1
    assert got["input_tokens"] + got["body"]["max_tokens"] <= got["window"] == 8192
    assert got["body"]["max_tokens"] == 300
    sent = got["body"]["messages"]
    assert sent[0] == body["messages"][0] and sent[-1] == body["messages"][-1]
    headers = resp.http_response.headers
    assert headers["x-context-guard-outcome"] == "fitted"
    assert int(headers["x-context-guard-tokens-before"]) > 8192 > int(headers["x-context-guard-tokens-after"])
    assert all(CANARY not in v for v in headers.values())


def test_implicit_max_tokens_arrives_explicit(proxy):
    proxy.reset()
    client(proxy).chat.completions.create(model="small", messages=[{"role": "user", "content": "hello"}])
    assert last_upstream(proxy)["body"]["max_tokens"] == 512  # the policy default


def test_a_hopeless_request_gets_a_400_with_numbers_and_never_reaches_upstream(proxy):
    proxy.reset()
    huge = "lorem ipsum dolor sit amet " * 4000
    with pytest.raises(openai.BadRequestError) as err:
        client(proxy).chat.completions.create(
            model="small", messages=[{"role": "user", "content": huge}], max_tokens=100
        )
    assert err.value.status_code == 400
    assert err.value.code == "context_length_exceeded"  # OpenAI's own error code
    assert err.value.response.headers.get("x-context-guard-outcome") == "rejected"
    assert err.value.body["type"] == "invalid_request_error" and err.value.body["param"] == "messages"
    message = str(err.value)
    assert "maximum context length is 8192 tokens" in message and "> 8192" in message
    assert "lorem" not in message
    assert proxy.received == []


def test_context_window_fallbacks_catch_a_rejection(proxy):
    proxy.reset()
    question = "please review: " + "def f(x): return x * 2\n" * 300  # ~3k tokens: too big for 2k, fine for 32k
    resp = client(proxy).chat.completions.create(
        model="tiny-with-fallback", messages=[{"role": "user", "content": question}], max_tokens=100
    )
    assert resp.choices[0].message.content.startswith("ok")
    models = [r["body"]["model"] for r in proxy.received]
    assert models == ["gpt-4o-32k"]  # the 2k deployment was never called


def test_team_policy_applies_and_clients_cannot_lift_it(proxy):
    proxy.reset()
    msgs = [{"role": "user", "content": "hi"}]
    client(proxy, "sk-team-a").chat.completions.create(model="small", messages=msgs, max_tokens=1000)
    assert last_upstream(proxy)["body"]["max_tokens"] == 128
    attempts = [
        dict(metadata={"context_guard_policy": {"max_output_tokens": 100000, "strategies": []}}),
        dict(
            metadata={
                "user_api_key_team_id": "team-vip",
                "user_api_key_team_metadata": {"context_guard": {"max_output_tokens": 9999}},
            }
        ),
        dict(extra_headers={"x-context-guard-policy": "off", "x-litellm-tags": "vip"}),
        dict(
            extra_body={
                "context_guard": {"max_output_tokens": 100000},
                "context_guard_policy": {"max_output_tokens": 100000},
            }
        ),
    ]
    for extra in attempts:
        proxy.reset()
        client(proxy, "sk-team-a").chat.completions.create(model="small", messages=msgs, max_tokens=1000, **extra)
        assert last_upstream(proxy)["body"]["max_tokens"] == 128, extra
    proxy.reset()
    client(proxy, "sk-team-b").chat.completions.create(model="small", messages=msgs, max_tokens=1000)
    assert last_upstream(proxy)["body"]["max_tokens"] == 64  # from the team's admin-set metadata
    proxy.reset()
    client(proxy, "sk-team-a").chat.completions.create(
        model="small", messages=msgs, max_tokens=1000, metadata={"context_guard_policy": {"max_output_tokens": 50}}
    )
    assert last_upstream(proxy)["body"]["max_tokens"] == 50  # tightening is allowed


def test_streaming_requests_are_fitted_too(proxy):
    proxy.reset()
    body = overflowing(turns=30)
    stream = client(proxy).chat.completions.create(
        model="small", messages=body["messages"], max_tokens=200, stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.startswith("ok")
    got = last_upstream(proxy)
    assert got["input_tokens"] + 200 <= 8192


def test_anthropic_route_with_tool_blocks(proxy):
    proxy.reset()
    body = to_anthropic(overflowing(turns=40), model="claude-small")
    c = anthropic.Anthropic(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=120)
    msg = c.messages.create(model="claude-small", system=body["system"], messages=body["messages"], max_tokens=400)
    assert msg.content[0].text.startswith("ok")
    got = last_upstream(proxy)
    assert got["path"].endswith("/v1/messages")
    assert got["input_tokens"] + got["body"]["max_tokens"] <= 8192 and got["body"]["max_tokens"] == 400
    sent = got["body"]["messages"]
    for i, m in enumerate(sent):  # every tool_use is answered in the next message
        uses = [b["id"] for b in m["content"] if isinstance(m["content"], list) and b.get("type") == "tool_use"]
        if uses:
            results = [b["tool_use_id"] for b in sent[i + 1]["content"] if b.get("type") == "tool_result"]
            assert sorted(results) == sorted(uses)
    proxy.reset()
    with c.messages.stream(
        model="claude-small", system=body["system"], messages=body["messages"], max_tokens=300
    ) as stream:
        streamed = "".join(stream.text_stream)
    assert streamed.startswith("ok")
    got = last_upstream(proxy)
    assert got["body"].get("stream") and got["input_tokens"] + 300 <= 8192
    with pytest.raises(anthropic.BadRequestError) as err:
        c.messages.create(model="claude-small", messages=[{"role": "user", "content": "word " * 20000}], max_tokens=100)
    assert err.value.status_code == 400
    assert err.value.body["error"]["type"] == "invalid_request_error"
    assert "maximum context length is 8192" in err.value.body["error"]["message"]


def test_a_computer_use_loop_loses_old_screenshots_not_steps(proxy):
    """A computer-use loop on /v1/messages, each result a screenshot: what reaches the provider
    keeps every step, the older screenshots each replaced by a line that says so."""
    proxy.reset()
    shot = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": blank_png(1000, 1000)}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "book a flight"}]
    for i in range(12):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}: I click the next button."},
                    {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "computer", "input": {"action": "left_click"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": [shot]}]},
        ]
    messages.append({"role": "user", "content": "continue"})
    c = anthropic.Anthropic(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=120)
    resp = c.messages.with_raw_response.create(model="claude-small", messages=messages, max_tokens=400)
    assert resp.http_response.headers["x-context-guard-outcome"] == "fitted"
    sent = last_upstream(proxy)["body"]["messages"]
    assert [m["role"] for m in sent] == [m["role"] for m in messages]
    results = [m["content"][0]["content"] for m in sent if m["role"] == "user" and isinstance(m["content"], list)]
    assert results[0] == [{"type": "text", "text": "[context-guard: 1 image part removed]"}]
    assert results[-1] == [shot]


def test_logging_metadata_carries_the_report_without_text(proxy):
    from tests.e2e.upstream import cached_tokens

    proxy.reset()
    body = overflowing(turns=35)
    resp = client(proxy).chat.completions.with_raw_response.create(
        model="small", messages=body["messages"], max_tokens=100
    )
    cut = resp.headers["x-context-guard-cut"]  # this request's record (other tests' may still be logging)
    n = last_upstream(proxy)["input_tokens"]
    deadline = time.time() + 15
    mine: list[dict] = []
    while time.time() < deadline:
        records = [json.loads(line) for line in proxy.events.read_text().splitlines() if line.strip()]
        mine = [
            r
            for r in records
            if ((r["metadata"].get("spend_logs_metadata") or {}).get("context_guard") or {}).get("cut") == cut
        ]
        if mine:
            break
        time.sleep(0.3)
    assert mine, cut
    summary = mine[-1]["metadata"]["spend_logs_metadata"]["context_guard"]
    assert summary["outcome"] == "fitted"
    assert summary["input_tokens_before"] > summary["input_tokens_after"]
    assert summary["actions"]
    assert len(cut) == 16
    # the provider's cache usage of this answer, next to what the guard did to the prompt
    assert summary["prompt_cache"] == {"read": cached_tokens(n), "write": 0, "uncached": n - cached_tokens(n)}
    # the provider's count against the guard's (here both count with the model's own tokenizer)
    assert (
        summary["count_ratio"] == round(n / summary["input_tokens_after"], 4) and 0.95 < summary["count_ratio"] < 1.05
    )
    assert CANARY not in proxy.events.read_text()
    assert CANARY not in proxy.log.read_text()


def test_metrics_endpoint_counts_outcomes(proxy):
    body = overflowing(turns=30)
    client(proxy).chat.completions.create(model="small", messages=body["messages"], max_tokens=100)
    resp = httpx.get(proxy.url + "/metrics/", headers={"authorization": "Bearer sk-master"}, timeout=10)
    assert resp.status_code == 200, resp.status_code
    text = resp.text
    assert "context_guard_requests_total" in text and 'outcome="fitted"' in text
    assert "context_guard_tokens_saved_total" in text and "context_guard_latency_seconds_bucket" in text
    assert CANARY not in text


def test_an_invalid_policy_stops_the_proxy_at_start_up(tmp_path):
    from tests.e2e.conftest import start_proxy

    config = """
model_list:
  - model_name: demo
    litellm_params: {model: openai/demo, mock_response: hi}
litellm_settings: {callbacks: guard.proxy.context_guard}
general_settings: {master_key: sk-master}
context_guard: {defaults: {low_water_ratio: 3}}
"""
    with pytest.raises(RuntimeError, match="(?s)proxy exited.*low_water_ratio"):
        start_proxy(config, tmp_path)


@pytest.mark.parametrize(
    "body",
    [
        {"model": "small", "messages": [{"content": "no role"}]},
        {"model": "small", "messages": [{"role": "user", "content": 42}]},
        {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": -5},
        {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "lots"},
        {"model": "small", "messages": ["just a string"]},
    ],
)
def test_bad_bodies_get_a_clear_400_and_the_proxy_keeps_serving(proxy, body):
    proxy.reset()
    resp = httpx.post(
        proxy.url + "/chat/completions", json=body, headers={"authorization": "Bearer sk-master"}, timeout=30
    )
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text[:300])
    assert proxy.received == []
    ok = client(proxy).chat.completions.create(model="small", messages=[{"role": "user", "content": "still there?"}])
    assert ok.choices[0].message.content.startswith("ok")


def _misses(proxy) -> float:
    text = httpx.get(proxy.url + "/metrics/", headers={"authorization": "Bearer sk-master"}, timeout=10).text
    lines = [x for x in text.splitlines() if x.startswith('context_guard_counting_misses_total{model="undersized"}')]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_a_provider_refusing_what_the_guard_counted_as_fitting_is_a_counting_miss(proxy):
    """The guard's limits for `undersized` are wrong (8k configured, the upstream enforces 3,000):
    the client gets the provider's context error, the proxy keeps serving, and each such request
    is counted once in context_guard_counting_misses_total, logged with numbers only."""
    proxy.reset()
    before = _misses(proxy)
    messages = [{"role": "user", "content": f"{CANARY} " + "word " * 4000}]
    for _ in range(2):
        with pytest.raises(openai.BadRequestError) as err:
            client(proxy).chat.completions.create(model="undersized", messages=messages, max_tokens=100)
        assert "context" in str(err.value).lower() or "maximum" in str(err.value).lower()
    assert [r["input_tokens"] for r in proxy.received] and all(r["input_tokens"] + 100 > 3000 for r in proxy.received)
    deadline = time.time() + 10  # failure callbacks run after the response
    while _misses(proxy) < before + 2 and time.time() < deadline:
        time.sleep(0.2)
    assert _misses(proxy) == before + 2
    ok = client(proxy).chat.completions.create(
        model="undersized", messages=[{"role": "user", "content": "short"}], max_tokens=50
    )
    assert ok.choices[0].message.content.startswith("ok")
    log = proxy.log.read_text()
    assert "counting miss" in log and CANARY not in log
