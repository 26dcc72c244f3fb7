"""Security through a real proxy: no canary in what the guard adds, no client-side escalation.

Canary: a unique string is planted in the system prompt, user and assistant texts, tool-call
arguments, tool results (plain, JSON values, JSON keys), tool schemas, in Anthropic blocks, in a
streamed request, a request the guard fits, one it forwards unchanged, one it rejects as hopeless
and one it refuses as malformed. It must appear in none of the sinks the guard writes to: response
headers, error bodies of the guard's refusals, the Prometheus /metrics page, the logging payload's
metadata (where the guard's report lives, as every logging integration sees it) and the proxy's
log. (The request itself is of course in LiteLLM's own payload: `messages` is what a logging
integration is for; this is about what the guard adds.)

Escalation: `sk-team-b`'s team metadata (set by an admin, trusted) caps its output at 64 tokens,
and `small` has an 8,192-token window. Every client-side way we know to lift either is tried:
body fields, metadata the guard or the proxy own, headers, body flags, model aliasing and
client-sent model info. The upstream must see max_tokens <= 64 and input + output <= 8,192 every
time (each attempt counts as an escalation if not).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from bench.traces import agent_trace, to_anthropic

CANARY = "zqxsecuritycanary"


def _post(
    proxy,
    body: dict[str, Any],
    key: str = "sk-master",
    headers: dict[str, str] | None = None,
    path: str = "/chat/completions",
) -> httpx.Response:
    return httpx.post(
        proxy.url + path, json=body, headers={"authorization": f"Bearer {key}", **(headers or {})}, timeout=120
    )


def _planted(turns: int, model: str = "small") -> dict[str, Any]:
    body = agent_trace(turns=turns, seed=turns, scale=0.05)
    msgs = body["messages"]
    msgs[0]["content"] += f" {CANARY}"
    msgs[1]["content"] += f" {CANARY}"
    for m in msgs:
        if m.get("tool_calls"):
            m["content"] = f"calling {CANARY}"
            for call in m["tool_calls"]:
                call["function"]["arguments"] = json.dumps({"path": f"src/{CANARY}.py"})
        elif m["role"] == "tool":
            m["content"] = json.dumps(
                {"results": [{"id": 1, "text": f"{CANARY} " + m["content"][:4000], CANARY: {"metadata": CANARY}}]},
                indent=2,
            )
    msgs.append({"role": "user", "content": f"and now? {CANARY}"})
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": f"reads {CANARY}",
                "parameters": {"type": "object", "properties": {CANARY: {"type": "string"}}},
            },
        }
    ]
    return {"model": model, "messages": msgs, "tools": tools, "max_tokens": 200}


def test_a_canary_in_every_part_of_the_request_reaches_no_sink_of_the_guard(proxy):
    proxy.reset()
    log_start = proxy.log.stat().st_size
    events_start = proxy.events.stat().st_size
    responses = []
    fitted = _planted(40)
    responses.append(_post(proxy, fitted))  # fitted
    responses.append(_post(proxy, _planted(2)))  # fits unchanged
    responses.append(_post(proxy, {**_planted(40), "stream": True}))  # streamed
    anthropic_body = {**to_anthropic(_planted(40), model="claude-small"), "max_tokens": 200}
    responses.append(_post(proxy, anthropic_body, path="/v1/messages"))
    hopeless = {"model": "small", "messages": [{"role": "user", "content": f"{CANARY} " + "word " * 20_000}]}
    responses.append(_post(proxy, hopeless))
    responses.append(
        _post(
            proxy,
            {"model": "small", "messages": [{"role": "user", "content": f"{CANARY}", "name": 5}, {"content": CANARY}]},
        )
    )
    statuses = [r.status_code for r in responses]
    assert statuses[:4] == [200, 200, 200, 200] and statuses[4] == 400 and 400 <= statuses[5] < 500, statuses
    assert responses[0].headers["x-context-guard-outcome"] == "fitted"
    assert responses[1].headers["x-context-guard-outcome"] == "unchanged"
    sinks: dict[str, str] = {}
    sinks["headers"] = json.dumps([dict(r.headers) for r in responses])
    sinks["refusals"] = responses[4].text + responses[5].text
    assert "maximum context length" in responses[4].text  # the refusal is the guard's, with numbers
    sinks["metrics"] = httpx.get(
        proxy.url + "/metrics/", headers={"authorization": "Bearer sk-master"}, timeout=10
    ).text
    deadline = time.time() + 15
    while time.time() < deadline:  # logging callbacks run after the response
        events = proxy.events.read_text()[events_start:]
        if events.count("\n") >= 5:
            break
        time.sleep(0.3)
    sinks["logging payload metadata"] = events
    assert "context_guard" in events  # the guard's report is there...
    sinks["proxy log"] = proxy.log.read_text()[log_start:]
    leaks = [name for name, text in sinks.items() if CANARY in text]
    assert leaks == []  # ...and no canary anywhere the guard writes


def _team_b(
    proxy, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[httpx.Response, dict[str, Any] | None]:
    proxy.reset()
    resp = _post(proxy, body, key="sk-team-b", headers=headers)
    received = proxy.received
    return resp, (received[-1] if received else None)


ASK = 1000  # what the client wants; team-b's trusted cap is 64
BASE = {"model": "small", "messages": [{"role": "user", "content": "hello"}], "max_tokens": ASK}
OUTPUT_ATTEMPTS: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("max_tokens in the body", BASE, {}),
    ("max_completion_tokens", {**BASE, "max_completion_tokens": ASK}, {}),
    (
        "the guard's report slot in metadata",
        {**BASE, "metadata": {"context_guard": {"max_output_tokens": ASK, "outcome": "unchanged"}}},
        {},
    ),
    (
        "client policy hints (may only tighten)",
        {**BASE, "metadata": {"context_guard_policy": {"max_output_tokens": ASK, "default_max_tokens": ASK}}},
        {},
    ),
    (
        "the proxy's team metadata field",
        {**BASE, "metadata": {"user_api_key_team_metadata": {"context_guard": {"max_output_tokens": ASK}}}},
        {},
    ),
    (
        "the proxy's key metadata field",
        {**BASE, "metadata": {"user_api_key_metadata": {"context_guard": {"max_output_tokens": ASK}}}},
        {},
    ),
    (
        "another team's id",
        {**BASE, "metadata": {"user_api_key_team_id": "team-a", "user_api_key_team_metadata": {}}},
        {},
    ),
    (
        "litellm_metadata",
        {**BASE, "litellm_metadata": {"context_guard": {"max_output_tokens": ASK}, "user_api_key_team_metadata": {}}},
        {},
    ),
    (
        "a policy header",
        BASE,
        {
            "x-context-guard-policy": json.dumps({"max_output_tokens": ASK}),
            "x-context-guard-max-output-tokens": str(ASK),
        },
    ),
    (
        "litellm headers",
        BASE,
        {"x-litellm-tags": "admin", "x-litellm-team-id": "team-a", "x-litellm-disable-callbacks": "context_guard"},
    ),
    (
        "body flags",
        {
            **BASE,
            "context_guard": {"enabled": False},
            "skip_guard": True,
            "guard": False,
            "disable_context_guard": True,
        },
        {},
    ),
    (
        "callbacks switched off in the body",
        {**BASE, "callbacks": [], "litellm_disabled_callbacks": ["context_guard"], "no-log": True},
        {},
    ),
    ("model aliasing (case)", {**BASE, "model": "SMALL"}, {}),
    ("model aliasing (underlying name)", {**BASE, "model": "openai/gpt-4o-8k"}, {}),
    (
        "a policy-free model group in metadata",
        {**BASE, "metadata": {"model_group": "big", "deployment": "openai/gpt-4o-32k"}},
        {},
    ),
]


@pytest.mark.parametrize("name,body,headers", OUTPUT_ATTEMPTS, ids=[a[0] for a in OUTPUT_ATTEMPTS])
def test_no_client_side_attempt_lifts_the_teams_output_cap(proxy, name, body, headers):
    resp, sent = _team_b(proxy, json.loads(json.dumps(body)), headers)
    if sent is None:  # refused before the provider (unknown model): no escalation either
        assert 400 <= resp.status_code < 500, (name, resp.status_code, resp.text[:200])
        return
    assert resp.status_code == 200, (name, resp.text[:300])
    out = sent["body"].get("max_tokens") or sent["body"].get("max_completion_tokens")
    assert out is not None and out <= 64, f"escalation through {name}: the provider was asked for {out} tokens"


def test_client_policy_hints_can_still_tighten(proxy):
    """The hint channel is live (so the test above is not vacuous): it lowers, never raises."""
    resp, sent = _team_b(proxy, {**BASE, "metadata": {"context_guard_policy": {"max_output_tokens": 20}}})
    assert resp.status_code == 200 and sent is not None and sent["body"]["max_tokens"] == 20


WINDOW_ATTEMPTS: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("model_info in the body", {"model_info": {"max_input_tokens": 1_000_000, "max_output_tokens": 100_000}}, {}),
    (
        "base_model and model_info in metadata",
        {"metadata": {"model_info": {"max_input_tokens": 1_000_000}, "base_model": "gpt-4.1"}},
        {},
    ),
    (
        "a bigger window as client hints",
        {"metadata": {"context_guard_policy": {"context_window": 1_000_000, "max_input_tokens": 1_000_000}}},
        {},
    ),
    (
        "the guard's report claiming a fit",
        {"metadata": {"context_guard": {"outcome": "unchanged", "fits": True, "passes": 9}}},
        {},
    ),
    ("a window header", {}, {"x-context-guard-context-window": "1000000"}),
    (
        "a calibration that shrinks counts",
        {"metadata": {"context_guard_policy": {"calibration": {"openai": 0.1, "other": 0.1}}}},
        {},
    ),
    ("strategies switched off", {"metadata": {"context_guard_policy": {"strategies": []}}}, {}),
]


@pytest.mark.parametrize("name,extra,headers", WINDOW_ATTEMPTS, ids=[a[0] for a in WINDOW_ATTEMPTS])
def test_no_client_side_attempt_gets_an_over_window_request_through(proxy, name, extra, headers):
    body = agent_trace(turns=40, seed=7, scale=0.05)
    resp, sent = _team_b(proxy, {"model": "small", "messages": body["messages"], **extra}, headers)
    if sent is None:
        assert resp.status_code == 400 and "maximum context length" in resp.text, (name, resp.text[:300])
        return  # refused as too long by the guard: no escalation
    assert resp.status_code == 200, (name, resp.text[:300])
    out = sent["body"].get("max_tokens") or 0
    assert sent["input_tokens"] + out <= sent["window"] == 8192, f"escalation through {name}"
