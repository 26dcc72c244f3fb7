"""A tool list that changes during a loop (an MCP server that connects or disconnects, a mode with
tools of its own: `bench.cache.with_tools`). A changed list is a new prefix at the provider, so the
turn it changes on finds nothing cached; what matters is the turns after it: the guard carries the
cut the conversation's record holds while it fits, and once it no longer fits makes a new one that
lasts, rather than the cut its replay of the history finds under today's tool list (which no turn
sent: no cached prefix, and carried that far, full)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import cache
from bench.sweep import How, _loops
from guard.core.errors import ContextWindowExceeded
from tests.strategies import long_agent_loop
from tests.test_went_back import outputs_in_turn

EXAMPLES = {"ci": 30, "dev": 20}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 1000)


def _replayed(
    name: str, tools: str | None, ratio: float = 0.5, outputs: str | None = None
) -> tuple[cache.Replay, cache.Replay, dict]:
    body = dict(dict(_loops(None, None))[name])
    edited = How(tools=tools, outputs=cache.outputs_of(outputs) if outputs else ()).edited(body)
    base = cache.replay(name, edited, None)
    run = cache.replay(name, edited, cache.window_policy(body, ratio))
    return base, run, cache.row(name, base, run, edited)


def _warm_breaks(run: cache.Replay) -> int:
    """Turns whose prompt does not start with the whole previous one though the provider still holds
    that one (the tool list unchanged: a changed one finds nothing cached)."""
    return sum(1 for a, b in zip(run.turns, run.turns[1:]) if 0 < b.cached < a.sent)


@pytest.mark.parametrize("name", ["moatless/django__django-13220", "docent/78_epoch_1"])
def test_a_cut_that_stops_fitting_after_the_tool_list_changed_is_made_anew(name):
    """Tools dropped on the 10th request, at half the loop's size: the guard's bill over the
    overflowing turns stays under the untrimmed loop's (session 70's guard paid 1.15x and 1.13x),
    and no more prefixes break on warm turns than with the tool list unchanged (it broke one more:
    the cut its replay found, under the shorter tool list, a cut no turn had sent)."""
    _, run, row = _replayed(name, "drop:10")
    _, plain, _ = _replayed(name, None)
    assert row["bill_over"] <= 1.0
    assert _warm_breaks(run) <= _warm_breaks(plain)


def test_a_cut_that_stops_fitting_under_another_max_tokens_is_made_anew():
    """The same where the client sets `max_tokens` turn by turn (drawn in 2048-2303): LiveMCPBench
    4d7582c4 at half its size pays under the untrimmed loop's bill over the overflowing turns
    (session 70's guard: 1.09x, a replayed cut no turn had sent taken twice, each cut again within
    two turns)."""
    _, run, row = _replayed("livemcp/4d7582c4", None, outputs="2048-2303")
    assert row["bill_over"] <= 1.0


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.one_of(long_agent_loop(), long_agent_loop(questions=True)),
    st.lists(st.integers(64, 512), min_size=2, max_size=4),
)
def test_a_cut_made_where_the_carried_one_stops_fitting_is_made_on_that_turn(case, outputs):
    """A growing conversation whose client sets `max_tokens` turn by turn (`outputs`, in turn: the
    room changes). Where the turn before was cut and this one goes with another cut, that cut is
    made on this turn's history (its record's length is the turn's), or is one the conversation
    sent before: never a past cut the replay finds under this turn's room, which no turn sent."""
    dialect, turns, engine = outputs_in_turn(case, outputs)
    sent: set[tuple[int, int]] = set()
    previous = None
    for turn in turns:
        try:
            report = cache.fit(engine, turn, None, dialect).report
        except ContextWindowExceeded:
            previous = None
            continue
        carried = report.carried
        cut = None if carried is None else (carried["length"], carried["mark"])
        if previous is not None and cut is not None and cut != previous and cut not in sent:
            assert carried["length"] == report.messages_before, (cut, previous, sorted(sent))
        if cut is not None:
            sent.add(cut)
        previous = cut


def test_tools_spec_is_checked():
    with pytest.raises(ValueError, match="--tools"):
        cache.with_tools({"model": "gpt-4o", "messages": []}, "swap:3")
    body = cache.with_tools({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, "add:1")
    first, *_ = cache.requests(body)
    assert "tools" not in first
