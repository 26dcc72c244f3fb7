"""Compaction end to end inside the process: the planner's summarize step driven by the
callback, with a scripted summarizer standing in for the LLM (the real one is in tests/e2e)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from bench.traces import agent_trace
from guard.core.config import Deployment
from guard.core.policy import PolicySet, load_policy_set
from guard.dialects import OPENAI, content_texts
from guard.fit.engine import Engine
from guard.fit.planner import SUMMARY_MARK
from guard.shell.callback import ContextGuard
from guard.shell.summarizer import Summarizing

WINDOW = 32_000
SUMMARY = (
    "Summary: the task is to fix the failing import; files src/app.py and tests/test_app.py; error ModuleNotFoundError."
)
TRACE = agent_trace()


class Scripted:
    """A summarizer call that records what it was asked and answers from a script."""

    def __init__(self, answer: Any = SUMMARY, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.calls: list[tuple[str, list[dict[str, str]], int]] = []

    async def __call__(self, model: str, messages: list[dict[str, str]], max_tokens: int, timeout: float) -> Any:
        self.calls.append((model, messages, max_tokens))
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _guard(call: Scripted, summarizer_window: int = 128_000, **settings: Any) -> ContextGuard:
    policies = load_policy_set({"models": {"gpt-4o": {"context_window": WINDOW}}})
    deployments = {
        "summarizer": Deployment(
            "summarizer", "openai/gpt-4o-mini", {"max_input_tokens": summarizer_window, "max_output_tokens": 4096}
        )
    }
    engine = Engine(policies, deployments=deployments, model_map=None)
    return ContextGuard(engine=engine, summarizer=Summarizing({"model": "summarizer", **settings}, call))


def _turn(guard: ContextGuard, n: int, team: str = "a") -> dict[str, Any]:
    body = json.loads(json.dumps({**TRACE, "model": "gpt-4o", "messages": TRACE["messages"][:n]}))
    body["metadata"] = {"user_api_key_team_id": team}
    return asyncio.run(guard.async_pre_call_deployment_hook(body, "acompletion"))


def _report(out: dict[str, Any]) -> dict[str, Any]:
    return out["metadata"]["context_guard"]


def _prefix_through_summary(out: dict[str, Any]) -> str:
    msgs = out["messages"]
    i = next(
        i
        for i, m in enumerate(msgs)
        if content_texts(m.get("content"))[:1] and content_texts(m["content"])[0].startswith("[context-guard: summary")
    )
    return json.dumps(msgs[: i + 1])


def test_an_agent_loop_compacts_once_per_crossing_and_reuses_the_summary():
    call = Scripted()
    guard = _guard(call)
    spans: list[int] = []
    prefixes: dict[int, str] = {}
    for n in range(200, 400, 4):  # 50 turns of an agent loop, crossing the window several times
        out = _turn(guard, n)
        report = _report(out)
        assert (
            report["fits"]
            and report["input_tokens_after"] + report["max_tokens"] + report["safety_margin_tokens"] <= WINDOW
        )
        summary = report["summary"]
        if summary is None:
            assert not spans, "once compacted, a conversation stays compacted"
            continue
        if spans and summary["span_tokens"] == spans[-1]:
            assert summary["source"] == "cache"  # same span: the cached summary, no call
            assert _prefix_through_summary(out) == prefixes[summary["span_tokens"]]  # byte-identical prefix
        else:
            assert summary["source"] == "llm"
            assert not spans or summary["span_tokens"] > spans[-1]  # spans only grow
        spans.append(summary["span_tokens"])
        prefixes.setdefault(summary["span_tokens"], _prefix_through_summary(out))
    crossings = len(set(spans))
    assert 2 <= crossings <= 6, f"compacted {crossings} times in 50 turns"
    assert len(call.calls) == crossings  # one call per crossing (each span fits one call)
    assert len(spans) - crossings >= 30  # cache hits on the turns after each crossing


def test_the_summary_is_marked_and_the_call_is_budgeted_and_flat():
    call = Scripted()
    out = _turn(_guard(call), 300)
    marker = SUMMARY_MARK.split("{")[0]
    summaries = [
        m
        for m in out["messages"]
        if content_texts(m.get("content"))[:1] and content_texts(m["content"])[0].startswith(marker)
    ]
    assert len(summaries) == 1 and summaries[0]["content"].endswith(SUMMARY)
    ((_, messages, max_tokens),) = call.calls
    assert [m["role"] for m in messages] == ["system", "user"]  # tool turns flattened to text
    assert max_tokens == 1024  # summary_max_tokens, explicit
    assert "tool result" in messages[1]["content"]


def test_map_reduce_keeps_every_summary_call_inside_the_summarizer_window():
    call = Scripted("Partial summary: task, files src/app.py, error ModuleNotFoundError.")
    guard = _guard(call, summarizer_window=6_000)
    out = _turn(guard, 300)
    report = _report(out)
    assert report["summary"]["calls"] == len(call.calls) > 2  # map calls and a merge
    engine = guard.engine
    policy = engine.policy_for("summarizer")
    counter, _ = engine.counter_for("summarizer", policy)
    margin = max(policy.safety_margin_tokens, int(policy.safety_margin_ratio * 6_000 + 0.999))
    for _, messages, max_tokens in call.calls:
        used = counter.body(OPENAI, {"messages": messages})
        assert used + max_tokens + margin <= 6_000
    assert "Partial summaries" in call.calls[-1][1][1]["content"]  # the reduce step


@pytest.mark.parametrize(
    ("script", "reason", "settings"),
    [
        (Scripted(delay=5.0), "summarizer_timeout", {"timeout_seconds": 0.05}),
        (Scripted(RuntimeError("provider down")), "summarizer_error", {}),
        (Scripted(""), "summary_empty", {}),
        (Scripted("word " * 3000), "summary_oversized", {}),
    ],
)
def test_a_failing_summarizer_still_serves_the_request_deterministically(script, reason, settings):
    out = _turn(_guard(script, **settings), 300)
    report = _report(out)
    assert report["fits"] and report["outcome"] == "fitted"
    assert {"kind": "summarize", "reason": reason} in report["skipped"]
    assert "drop_oldest_turns" in [a["kind"] for a in report["actions"]]  # strategy 7 took over
    assert "summarize" not in [a["kind"] for a in report["actions"]]


def test_a_summarizing_fit_that_ends_over_the_room_is_fitted_the_deterministic_way(monkeypatch):
    """Where the summarizer's path of a whole fit ends over the room (a summary took room the cuts
    after it could not make up: a held-out Copilot CLI turn at 30% of its loop's size was refused 77
    tokens over a 23,285-token room), the request is fitted without summaries, not refused."""
    import guard.fit.planner as planner

    whole = planner.fit

    def no_carried_cut(*args: Any, **kwargs: Any) -> Any:
        return None
        yield  # (a plan step: a generator)

    def summarizing_cuts_nothing(conv: Any, ctx: Any, policy: Any, can_summarize: bool) -> Any:
        if can_summarize:
            return conv, ctx
        return (yield from whole(conv, ctx, policy, can_summarize))

    monkeypatch.setattr(planner, "carried", no_carried_cut)
    monkeypatch.setattr(planner, "fit", summarizing_cuts_nothing)
    report = _report(_turn(_guard(Scripted()), 300))
    assert report["fits"] and report["outcome"] == "fitted"
    assert report["input_tokens_after"] <= report["room"]
    assert [s for s in report["skipped"] if s["kind"] == "summarize"] == [
        {"kind": "summarize", "reason": "summary_over_room"}
    ]  # (why, and not the `no_summarizer` of the path it went by)
    assert "drop_oldest_turns" in [a["kind"] for a in report["actions"]]


def test_the_circuit_opens_after_repeated_failures():
    """Two failures in a row open the circuit (two teams' conversations: a conversation's later
    turns carry its cut without asking again, see the next test); a third asks nothing."""
    call = Scripted(RuntimeError("down"))
    guard = _guard(call, failure_threshold=2, cooldown_seconds=3600)
    for team in ("a", "b"):
        assert {"kind": "summarize", "reason": "summarizer_error"} in _report(_turn(guard, 300, team))["skipped"]
    before = len(call.calls)
    report = _report(_turn(guard, 340, "c"))
    assert len(call.calls) == before  # not called while open
    assert {"kind": "summarize", "reason": "summarizer_circuit_open"} in report["skipped"]
    assert report["fits"]


def test_a_cut_whose_summary_failed_is_carried_without_one_and_the_summarizer_not_asked_again():
    """A new cut whose summary failed is remembered so in the summary cache (`WithheldSummary`):
    the turns that carry the cut send it as the first did, without a summary, and do not call the
    summarizer again (each would have, and a summary that came later would have changed the
    carried prefix). (A worker with no record sending the same: tests/test_cache_replay.py.)"""
    call = Scripted(RuntimeError("down"))
    guard = _guard(call, failure_threshold=100)
    first = _turn(guard, 300)
    assert {"kind": "summarize", "reason": "summarizer_error"} in _report(first)["skipped"]
    assert len(call.calls) == 1
    for n in (302, 304, 306):
        out = _turn(guard, n)
        report = _report(out)
        assert report["cut"] == _report(first)["cut"]  # (the same cut, carried)
        assert {"kind": "summarize", "reason": "summary_withheld"} in report["skipped"]
        assert json.dumps(out["messages"][: len(first["messages"]) - 1]) == json.dumps(first["messages"][:-1])
    assert len(call.calls) == 1


def test_a_span_known_by_its_digest_alone_finds_its_summary_and_is_never_summarized_again():
    """A carried cut whose oldest dropped messages a client slid out since keeps the summary its
    last turn sent: the request names the span by its digest (`SummaryRequest.span`), the summary
    cache finds the text the whole span got, and where the cache lost it the model is not asked
    (the messages it would summarize are gone: the core then makes a new cut)."""
    from guard.core.config import SummarizerSettings
    from guard.fit.planner import SummaryRequest
    from guard.fit.summary import span_digest, transcript
    from guard.shell.summarizer import Summarizer

    call = Scripted()
    engine = _guard(call).engine
    summarizer = Summarizer(SummarizerSettings(model="summarizer"), engine, call=call)
    messages = tuple(TRACE["messages"][2:12])
    whole = SummaryRequest("openai", messages, 4000, 256, tuple(transcript(OPENAI, messages)))
    slid = SummaryRequest("openai", messages[4:], 4000, 256, span=span_digest(whole.lines), span_messages=10)
    assert slid.size == 10 and whole.size == 10
    assert asyncio.run(summarizer.cached([slid], "a")) == (None,)
    gone = asyncio.run(summarizer.summarize(slid, "a"))
    assert gone.text is None and gone.reason == "summary_gone" and call.calls == []
    made = asyncio.run(summarizer.summarize(whole, "a"))
    assert made.text == SUMMARY and len(call.calls) == 1
    assert asyncio.run(summarizer.cached([slid, whole], "a")) == (SUMMARY, SUMMARY)
    assert asyncio.run(summarizer.summarize(slid, "a")).source == "cache" and len(call.calls) == 1
    assert asyncio.run(summarizer.cached([slid], "b")) == (None,)  # (never another tenant's)
    other = SummaryRequest("openai", messages[4:], 4000, 128, span=slid.span, span_messages=10)
    assert asyncio.run(summarizer.cached([other], "a")) == (None,)  # (nor one asked with another budget)


def test_a_summary_never_crosses_tenants():
    call = Scripted()
    guard = _guard(call)
    a = _turn(guard, 300, team="a")
    b = _turn(guard, 300, team="b")
    assert _report(a)["summary"]["source"] == "llm" and _report(b)["summary"]["source"] == "llm"
    assert len(call.calls) == 2
    assert _report(_turn(guard, 300, team="a"))["summary"]["source"] == "cache"


def test_no_summarizer_is_reported_and_the_deterministic_path_fits():
    guard = ContextGuard(policies=PolicySet.model_validate({"defaults": {"context_window": WINDOW}}))
    report = _report(_turn(guard, 300))
    assert report["fits"] and {"kind": "summarize", "reason": "no_summarizer"} in report["skipped"]


def test_fitting_the_fitted_request_changes_nothing():
    call = Scripted()
    guard = _guard(call)
    out = _turn(guard, 300)
    again = copy.deepcopy(out)
    again["metadata"] = {"user_api_key_team_id": "a"}
    second = asyncio.run(guard.async_pre_call_deployment_hook(again, "acompletion"))
    assert _report(second)["outcome"] == "unchanged"
    assert second["messages"] == out["messages"]
    assert len(call.calls) == 1


def test_other_context_managers_are_detected_and_reported():
    guard = ContextGuard(policies=PolicySet())
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
    }
    out = asyncio.run(guard.async_pre_call_deployment_hook(body, "anthropic_messages"))
    report = out["litellm_metadata"]["context_guard"]
    assert report["other_context_managers"] == ["anthropic_context_management"]
    assert out["context_management"] == body["context_management"]  # left for the provider
    from guard.state import telemetry

    assert telemetry.headers(report)["x-context-guard-coexisting"] == "anthropic_context_management"


def test_the_summary_call_goes_through_litellm_without_being_guarded_again(monkeypatch):
    import litellm

    policies = load_policy_set({"models": {"gpt-4o": {"context_window": WINDOW}}})
    guard = ContextGuard(
        engine=Engine(policies, model_map=None),
        summarizer={"model": "openai/gpt-4o-mini", "litellm_params": {"mock_response": SUMMARY, "api_key": "unused"}},
    )
    passes: list[str] = []
    original = guard._guard

    async def counting(data: dict, route: Any, attempt: Any) -> Any:
        passes.append(str(data.get("model")))
        return await original(data, route, attempt)

    monkeypatch.setattr(guard, "_guard", counting)
    monkeypatch.setattr(litellm, "callbacks", [guard])
    body = json.loads(json.dumps(TRACE["messages"][:300]))
    response = asyncio.run(
        litellm.acompletion(model="gpt-4o", messages=body, mock_response="done", metadata={"user_api_key_team_id": "a"})
    )
    assert response.choices[0].message.content == "done"
    assert passes == ["gpt-4o"]  # the summarizer's own acompletion passed the hook untouched
    # the summarizer really answered through LiteLLM: its text is what the cache now holds
    assert SUMMARY in list(guard._cache._memory.values())
