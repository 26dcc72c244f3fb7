"""Thinking budgets stay valid when the guard sets or lowers the output limit (issue 14, item 1).

Validity is judged on what LiteLLM itself sends: chat bodies go through LiteLLM's own Anthropic and
Gemini parameter mapping, and the Anthropic rule (1024 <= budget_tokens < max_tokens) is checked on
its output, not on hand-written expectations.
"""

from __future__ import annotations

from typing import Any

import litellm
import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.core.config import Deployment
from guard.core.errors import BadRequest
from guard.core.policy import Policy, PolicySet
from guard.core.reasoning import ThinkingWithoutRoom
from guard.fit.engine import Engine

CLAUDE = "anthropic/claude-sonnet-4-5"


def _engine(
    max_output: int, *, model: str = CLAUDE, window: int = 200_000, teams: dict | None = None, **policy: Any
) -> Engine:
    deployments = {
        "claude-cap": Deployment("claude-cap", model, {"max_input_tokens": window, "max_output_tokens": max_output})
    }
    return Engine(
        PolicySet(defaults=Policy(**policy), teams=teams or {}), deployments=deployments, model_map=litellm.model_cost
    )


def _cc_body(**extra: Any) -> dict[str, Any]:
    """Claude Code's first request shape: max_tokens 32000 with a 31,999-token thinking budget."""
    return {
        "model": "claude-cap",
        "max_tokens": 32000,
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "fix the failing test"}]}],
        **extra,
    }


def anthropic_valid(max_tokens: int, thinking: Any) -> bool:
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return True
    return 1024 <= thinking["budget_tokens"] < max_tokens


def litellm_anthropic_params(body: dict[str, Any]) -> dict[str, Any]:
    """What LiteLLM's chat -> Anthropic mapping makes of a chat body's output and reasoning fields."""
    params = {k: body[k] for k in ("max_tokens", "max_completion_tokens", "thinking", "reasoning_effort") if k in body}
    return litellm.AnthropicConfig().map_openai_params(
        non_default_params=params, optional_params={}, model="claude-sonnet-4-5", drop_params=False
    )


def test_claude_code_request_under_a_model_cap_keeps_a_valid_budget():
    fitted = _engine(8192).fit(_cc_body(), dialect="anthropic")
    assert fitted.body["max_tokens"] == 8192
    assert fitted.body["thinking"] == {"type": "enabled", "budget_tokens": 8191}  # the client's 1-token answer room
    assert anthropic_valid(fitted.body["max_tokens"], fitted.body["thinking"])
    report = fitted.report
    assert report.outcome == "fitted"
    assert {a.kind for a in report.actions} == {"clamp_output", "clamp_thinking"}
    assert report.reasoning == [{"field": "thinking.budget_tokens", "before": 31999, "after": 8191}]


def test_the_clients_answer_room_is_kept_when_the_budget_allows():
    body = _cc_body(max_tokens=16000, thinking={"type": "enabled", "budget_tokens": 10000})
    fitted = _engine(8192).fit(body, dialect="anthropic")
    assert fitted.body["thinking"]["budget_tokens"] == 8192 - 6000


def test_a_team_cap_lowers_the_budget_with_max_tokens():
    teams = {"t": {"max_output_tokens": 1500}}
    engine = _engine(64000, teams=teams)
    policy, _ = engine.policies.resolve(("claude-cap",), team=("t",))
    body = _cc_body(max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2000})
    fitted = engine.fit(body, dialect="anthropic", policy=policy)
    assert fitted.body["max_tokens"] == 1500
    assert fitted.body["thinking"]["budget_tokens"] == 1024  # the minimum: the client's answer room does not fit
    assert anthropic_valid(1500, fitted.body["thinking"])


def test_a_cap_with_no_room_for_thinking_is_refused_with_the_cap_named():
    engine = _engine(64000, max_output_tokens=1024)
    with pytest.raises(ThinkingWithoutRoom) as e:
        engine.fit(_cc_body(max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2000}), dialect="anthropic")
    assert isinstance(e.value, BadRequest)
    assert "capped at 1024" in str(e.value) and "at least 1024" in str(e.value)


def test_the_policy_may_turn_thinking_off_instead():
    engine = _engine(64000, max_output_tokens=1024, thinking_without_room="disable")
    fitted = engine.fit(
        _cc_body(max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2000}), dialect="anthropic"
    )
    assert "thinking" not in fitted.body and fitted.body["max_tokens"] == 1024
    assert fitted.report.reasoning == [{"field": "thinking", "before": "enabled", "after": None}]


def test_the_clamp_step_never_goes_below_a_valid_budget():
    # input nearly fills the window: the clamp step would lower max_tokens to 200, below any budget
    engine = _engine(64000, window=6000, min_output_tokens=100, safety_margin_tokens=0, safety_margin_ratio=0.0)
    body = _cc_body(max_tokens=4000, thinking={"type": "enabled", "budget_tokens": 3000})
    body["messages"][0]["content"][0]["text"] = "word " * 3500
    fitted = engine.fit(body, dialect="anthropic")
    assert fitted.body["max_tokens"] >= 1025
    assert anthropic_valid(fitted.body["max_tokens"], fitted.body["thinking"])


@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high", "xhigh", "max"])
@pytest.mark.parametrize("cap", [1100, 2048, 3000, 5000, 9000, 20000])
def test_reasoning_effort_on_the_chat_route_is_valid_after_litellms_own_mapping(effort, cap):
    engine = _engine(cap)
    body = {
        "model": "claude-cap",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 32000,
        "reasoning_effort": effort,
    }
    fitted = engine.fit(body, dialect="openai")
    sent = litellm_anthropic_params(fitted.body)
    assert sent["max_tokens"] == cap
    assert anthropic_valid(sent["max_tokens"], sent.get("thinking")), (effort, cap, sent)
    unguarded = litellm_anthropic_params({**body, "max_tokens": cap})
    if not anthropic_valid(cap, unguarded.get("thinking")):  # the guard made the difference
        assert fitted.report.reasoning and fitted.report.reasoning[0]["field"] == "reasoning_effort"


def test_reasoning_effort_under_a_cap_below_any_budget_is_refused():
    body = {"model": "claude-cap", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "low"}
    with pytest.raises(ThinkingWithoutRoom):
        _engine(1024).fit(body, dialect="openai")


def test_chat_thinking_param_through_litellm_mapping():
    body = {
        "model": "claude-cap",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 32000,
        "thinking": {"type": "enabled", "budget_tokens": 31999},
    }
    sent = litellm_anthropic_params(_engine(8192).fit(body, dialect="openai").body)
    assert sent["max_tokens"] == 8192 and anthropic_valid(8192, sent["thinking"])


def test_gemini_thinking_budget_stays_inside_max_output_tokens():
    engine = _engine(4000, model="gemini/gemini-2.5-pro", window=1_000_000)
    body = {
        "model": "claude-cap",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 30000,
        "thinking": {"type": "enabled", "budget_tokens": 20000},
    }
    fitted = engine.fit(body, dialect="openai")
    params = litellm.VertexGeminiConfig().map_openai_params(
        non_default_params={k: fitted.body[k] for k in ("max_tokens", "thinking")},
        optional_params={},
        model="gemini-2.5-pro",
        drop_params=False,
    )
    assert params["max_output_tokens"] == 4000
    assert params["thinkingConfig"]["thinkingBudget"] < 4000


def test_a_request_without_reasoning_is_untouched_by_this_step():
    body = {"model": "claude-cap", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}
    fitted = _engine(8192).fit(body, dialect="openai")
    assert fitted.report.outcome == "unchanged" and fitted.report.reasoning == []


@given(
    cap=st.integers(1, 70000),
    requested=st.integers(1, 70000),
    budget=st.integers(1024, 69999),
    mode=st.sampled_from(["refuse", "disable"]),
)
def test_any_cap_leaves_a_valid_budget_or_a_clear_refusal(cap, requested, budget, mode):
    if budget >= requested:
        return  # the client's own request would be invalid at Anthropic
    engine = _engine(cap, thinking_without_room=mode)
    body = _cc_body(max_tokens=requested, thinking={"type": "enabled", "budget_tokens": budget})
    try:
        fitted = engine.fit(body, dialect="anthropic")
    except ThinkingWithoutRoom:
        assert mode == "refuse" and min(cap, requested) <= 1024
        return
    out = fitted.body
    assert out["max_tokens"] == min(cap, requested)
    assert anthropic_valid(out["max_tokens"], out.get("thinking"))
    if "thinking" in out:
        assert out["thinking"]["budget_tokens"] <= budget  # only ever lowered
    else:
        assert mode == "disable" and out["max_tokens"] <= 1024
