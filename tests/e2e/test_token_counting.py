"""Issue 25, item 1 (part): the proxy's token-counting endpoints answer with the guard's own count,
so an agent that counts through the proxy (Claude Code: /v1/messages/count_tokens; Codex:
/v1/responses/input_tokens) and the guard agree on when the window is reached."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
import yaml

from bench.traces import agent_trace
from guard.core.config import parse_config
from guard.fit.engine import Engine
from tests.e2e.conftest import proxy_config
from tests.strategies import to_anthropic, to_responses

pytestmark = pytest.mark.slow


def _engine(proxy) -> Engine:
    """The proxy's engine, built from the same config text (static calibration: no learning)."""
    return Engine.from_guard_config(parse_config(yaml.safe_load(proxy_config(proxy.upstream.port))))


def _conversation() -> list[dict]:
    msgs = agent_trace(turns=12, seed=12, scale=0.05)["messages"] + [{"role": "user", "content": "and now?"}]
    return [{**m, "x_id": i} for i, m in enumerate(msgs)]


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in ("x_id", "_results")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def test_anthropic_count_tokens_is_the_guards_count(proxy):
    system, messages = to_anthropic(_conversation())
    body = _clean({"model": "claude-small", "system": system, "messages": messages})
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=60)
    answered = client.messages.count_tokens(**body).input_tokens
    assert answered == _engine(proxy).count(body, dialect="anthropic")
    assert proxy.received == [] or all(
        "count_tokens" not in r["path"] for r in proxy.received
    )  # never reaches the provider


def test_responses_input_tokens_is_the_guards_count(proxy):
    instructions, items = to_responses(_conversation(), False)
    body = _clean({"model": "small", "input": items, **({"instructions": instructions} if instructions else {})})
    client = openai.OpenAI(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=60)
    answered = client.responses.input_tokens.count(**body).input_tokens
    assert answered == _engine(proxy).count(body, dialect="responses")


def test_counting_needs_a_key_and_a_body_it_can_read(proxy):
    r = httpx.post(proxy.url + "/v1/messages/count_tokens", json={"model": "claude-small", "messages": []})
    assert r.status_code == 401
    auth = {"authorization": "Bearer sk-master"}
    r = httpx.post(proxy.url + "/v1/messages/count_tokens", content=b"{not json", headers=auth)
    assert r.status_code == 400 and "json" in r.text.lower(), r.text
    r = httpx.post(proxy.url + "/v1/responses/input_tokens", json={"input": "hi"}, headers=auth)
    assert r.status_code == 400 and "model" in r.json()["error"]["message"]
    assert httpx.get(proxy.url + "/health/liveliness").status_code == 200  # and the proxy keeps serving


def test_model_info_carries_the_limits_the_guard_enforces_for_the_caller(proxy):
    """`/model/info` entries carry `model_info.context_guard`, per caller: team-a's output cap of
    128 (tests/e2e/conftest.py) shows for its key and not for the admin's."""

    def limits(key: str) -> dict[str, dict]:
        r = httpx.get(proxy.url + "/model/info", headers={"authorization": f"Bearer {key}"}, timeout=60)
        assert r.status_code == 200, r.text
        return {e["model_name"]: e["model_info"].get("context_guard") for e in r.json()["data"]}

    admin, team = limits("sk-master"), limits("sk-team-a")
    engine = _engine(proxy)
    for name in ("small", "claude-small"):
        from guard.core.announce import announce

        policy = engine.policy_for(name)
        # the proxy's calibration factor (static, or learned from what this session's requests billed)
        factor = admin[name]["count_factor"]
        a = announce(name, engine.limits_for(name, policy), policy, factor)
        assert admin[name] == {
            "context_window": a.window,
            "max_output_tokens": a.max_output,
            "safety_margin_tokens": a.margin,
            "max_input_tokens": a.input_limit,
            "agent_context_window": a.agent_window,
            "auto_compact_tokens": a.auto_compact,
            "count_factor": factor,
        }
        # what agents are told is the provider's tokens: the guard's input limit over its factor
        assert a.agent_window == int(a.input_limit / max(1.0, factor)) + a.max_output
        assert factor == engine.counter_and_factor(name, policy)[2].value or name == "claude-small"
        assert admin[name]["context_window"] == 8192 and admin[name]["max_output_tokens"] == 2048
        assert (
            team[name]["max_output_tokens"] == 128 and team[name]["max_input_tokens"] > admin[name]["max_input_tokens"]
        )


def test_v1_models_carries_them_too(proxy):
    client = openai.OpenAI(base_url=proxy.url, api_key="sk-team-a", max_retries=0, timeout=60)
    listed = {m.id: (m.model_extra or {}).get("context_guard") for m in client.models.list()}
    assert listed["small"]["max_output_tokens"] == 128 and listed["small"]["context_window"] == 8192
    assert listed["claude-small"]["max_output_tokens"] == 128
