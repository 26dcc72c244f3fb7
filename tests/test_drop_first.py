"""The drop decided first without a first pass (guard.fit.rounds._dropped_first): where truncating
every older result falls short of the mark, the fit skips the truncation the first pass would make
and then undo, and sends what the first pass and its drop-first cut would have sent."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.traces import agent_trace
from guard.core.config import Deployment
from guard.core.policy import Policy, PolicySet
from guard.fit import rounds
from guard.fit.engine import Engine
from guard.fit.planner import Fitted
from guard.fit.strategies import STRATEGIES
from tests.strategies import long_agent_loop
from tests.test_properties import UNDERLYING, _growing
from tests.test_strategies import agent, engine, words


def _both(make: Any, body: dict[str, Any], **kw: Any) -> tuple[Fitted, Fitted, int]:
    """The fit of `body` by a new engine, and by another with the shortcut off; how many fits took it."""
    taken = 0
    real = rounds._dropped_first

    def counted(*args: Any) -> Any:
        nonlocal taken
        out = real(*args)
        taken += out is not None
        return out

    with mock.patch.object(rounds, "_dropped_first", counted):
        fast = make().fit(body, **kw)
    with mock.patch.object(rounds, "_dropped_first", lambda *args: None):
        full = make().fit(body, **kw)
    return fast, full, taken


def test_truncation_that_would_be_undone_is_not_made():
    # 60 results of ~570 tokens into a room of 11,900: cut each to its 200-token floor and they
    # would still fill it, so turns go, and the drop-first cut keeps the rest whole
    body = agent([words(250, seed=i) for i in range(60)])
    calls: list[tuple[str, int]] = []
    spy = {
        name: (lambda f, n: lambda conv, ctx: calls.append((n, conv.total)) or f(conv, ctx))(f, name)
        for name, f in STRATEGIES.items()
    }
    make = lambda: engine(12_000, relevance="off")  # noqa: E731
    with mock.patch.dict(STRATEGIES, spy):
        fast, full, taken = _both(make, body)
    assert (
        taken >= 1
    )  # (a new engine first replays the cuts of the history's past turns: see guard.fit.carried.last_cut)
    assert json.dumps(fast.body) == json.dumps(full.body)
    assert fast.report == full.report
    assert [a.kind for a in fast.report.actions] == ["drop_oldest_turns"]
    names = [n for n, _ in calls]
    assert "truncate_tool_results" in names  # (the full path truncates, then drops first again)
    # the request's own fit (the first call on its whole history, up to its drop) truncates nothing
    whole = max(total for _, total in calls)
    start = next(i for i, (_, total) in enumerate(calls) if total == whole)
    first_fit = names[start : names.index("drop_oldest_turns", start) + 1]
    assert "truncate_tool_results" not in first_fit


def test_truncation_that_reaches_the_mark_still_runs():
    body = agent([words(250, seed=i) for i in range(60)])
    fast, full, taken = _both(lambda: engine(24_000, relevance="off"), body)
    assert taken == 0
    assert "truncate_tool_results" in [a.kind for a in fast.report.actions]
    assert fast.report == full.report


def test_a_prefix_whose_truncation_reaches_its_mark_is_rewritten_once():
    # a new engine replays the history's past crossings, fitting each one's prefix to its mark:
    # where truncating the history as it came already reaches that mark, the drop-first pass would
    # stop at its first lossy step and be thrown away, so it is not started and no rewrite
    # (compaction, metadata, dedupe) of the same conversation is made twice
    body = dict(agent_trace(turns=60, seed=3), model="m")
    window = engine(10**7).fit(body).report.input_tokens_before // 2
    calls: list[tuple[str, int]] = []
    spy = {
        name: (lambda f, n: lambda conv, ctx: calls.append((n, conv.total)) or f(conv, ctx))(f, name)
        for name, f in STRATEGIES.items()
    }
    with mock.patch.dict(STRATEGIES, spy):
        fitted = engine(window).fit(body)
    assert fitted.report.changed and "drop_oldest_turns" in [a.kind for a in fitted.report.actions]
    assert "truncate_tool_results" in [name for name, _ in calls]  # (a past crossing's prefix)
    rewrites = [c for c in calls if c[0] in ("compact_json", "drop_metadata", "dedupe")]
    assert rewrites and len(set(rewrites)) == len(rewrites), rewrites


@settings(max_examples=40, deadline=None)
@given(long_agent_loop(), st.sampled_from([16, 64, 200]), st.sampled_from([1.0, Policy().low_water_ratio]))
def test_a_loop_replayed_turn_by_turn_sends_the_same_with_and_without_the_shortcut(case, floor, low_water):
    body, settings_ = case
    dialect = settings_["dialect"]
    probe = Engine(
        PolicySet(defaults=Policy()),
        deployments={"tiny": Deployment("tiny", UNDERLYING[dialect], {"max_input_tokens": 10**7})},
        model_map={},
    )
    full_size = probe.fit(body, dialect=dialect).report.input_tokens_before
    window = int(full_size * settings_["share"]) + settings_["max_output"]
    policy = Policy(
        keep_recent_groups=settings_["keep_recent_groups"],
        safety_margin_tokens=0,
        safety_margin_ratio=0.0,
        truncated_tool_result_tokens=floor,
        relevance=settings_["relevance"],
        low_water_ratio=low_water,
    )
    info = {"max_input_tokens": window, "max_output_tokens": settings_["max_output"]}

    def make() -> Engine:
        deployments = {"tiny": Deployment("tiny", UNDERLYING[dialect], info)}
        return Engine(PolicySet(defaults=policy), deployments=deployments, model_map={})

    for turn in _growing(body):
        fast, full, _ = _both(make, turn, dialect=dialect)
        assert json.dumps(fast.body) == json.dumps(full.body)
        assert fast.report == full.report
