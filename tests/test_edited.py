"""Histories the client edits between turns (guard.fit.edited): SWE-agent's `last_n_observations`
stubs all but the newest results, others move cache breakpoints. The conversation's record keeps the
cut the last turn sent, and a turn carries it while it fits, so the guard stops sending only what the
client itself changed."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.cache import loops, replay, row, window_policy, with_client
from bench.clients import breakpoints, last_n_observations
from guard.dialects import by_name, detect
from guard.fit.edited import LastCut, counts_digest, spine
from guard.fit.engine import Engine, FitRequest, Judged
from guard.fit.planner import run
from guard.fit.temperature import Seen, Temperature
from tests.strategies import long_agent_loop
from tests.test_properties import _engine, _growing, _turns, sized

CHAT = by_name("openai")


def _history(results: list[str]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "task"}]
    for i, text in enumerate(results):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": text})
    return msgs


def test_a_record_tells_an_edited_history_from_an_appended_one_and_from_another_conversation():
    msgs = _history(["one two three", "four five", "six"])
    counts = [5, 3, 9, 12, 9, 7, 9, 4]
    last = LastCut.of(CHAT, msgs, counts, (6, 20))
    assert (last.length, last.mark, last.prefix_tokens, last.history) == (6, 20, 45, 8)
    grown = msgs + _history(["seven"])[2:]
    assert last.of_this(CHAT, grown, [*counts, 9, 6]) and not last.changed([*counts, 9, 6])  # appended
    stubbed = [*counts[:3], 2, *counts[4:]]  # the client stubbed the first result
    assert last.of_this(CHAT, msgs, stubbed) and last.changed(stubbed)
    assert last.taken(stubbed) == 10  # what the client took out of the cut's prefix
    assert last.taken([*counts[:3], 20, *counts[4:]]) == -8  # an edit that adds: less than nothing
    rewritten = [*counts[:4], 14, 9, *counts[6:]]  # the client rewrote the last exchange the cut was made on
    assert last.of_this(CHAT, msgs, rewritten) and last.changed(rewritten)
    other = [5, 3, 11, *counts[3:]]  # another run of the same task: the model's first reply differs
    assert not last.of_this(CHAT, msgs, other)
    assert not last.of_this(CHAT, msgs[:6], counts[:6])  # shorter: the client's own compaction, or a cut body
    # a cut that sent the pinned two, a marker and messages 4 on: a stub of what it left out takes nothing
    dropping = LastCut.of(CHAT, msgs, counts, (6, 20), kept=[0, 1, -1, 4, 5])
    assert (dropping.dropped, dropping.dropped_tokens) == (((2, 4),), 21)
    assert dropping.taken(stubbed) == 0 and dropping.taken([*counts[:4], 5, *counts[5:]]) == 4
    assert LastCut.from_dict(dropping.to_dict()) == dropping
    carried = last.carried(stubbed)
    assert (carried.length, carried.mark, carried.prefix_tokens) == (6, 20, 45) and carried.edited
    assert carried.digest == counts_digest(stubbed) and carried.spine == spine(CHAT, msgs, stubbed, 6)


def test_the_record_goes_through_the_shared_log_and_rejects_what_is_not_one():
    last = LastCut.of(CHAT, _history(["a"]), [1, 2, 3, 4], (4, 9), under_bar=True)
    seen = Seen(5.0, None, last)
    assert Seen.from_json(seen.to_json()) == seen
    assert Seen.from_json(json.dumps({"at": 5.0})) == Seen(5.0)  # a record written before there was one
    for bad in ({"length": -1}, {"mark": "9"}, {"spine": None}, {"dropped": [[1]]}, {"dropped_tokens": -2}, [1, 2]):
        data = bad if not isinstance(bad, dict) or "digest" in bad else {**last.to_dict(), **bad}
        assert LastCut.from_dict(data) is None


SWE = [(name, body) for name, body in loops() if name.startswith("swe/django__django-11848/")]


def test_a_real_loop_whose_client_stubs_old_results_keeps_its_cut_while_it_fits():
    """A real SWE-bench run replayed with SWE-agent's `last_n_observations: 5` (every result but
    the newest five stubbed, so each changes five turns after it came), at half its size. The
    replay of a stubbed past finds earlier turns fitting that were cut when sent; before the record
    the guard cut anew on 9 turns and paid 1.34x the untrimmed loop's input bill over the
    overflowing turns (the client's stubs break the untrimmed loop's cache on every turn too);
    measured with it: 1 new cut, 0.85x."""
    name, body = SWE[0]
    edited = with_client(body, last_n_observations(5))
    d = detect(body)
    sent: list[tuple[list[dict[str, Any]], str | None]] = []
    base = replay(name, edited, None)
    guarded = replay(
        name,
        edited,
        window_policy(body, 0.5),
        on_turn=lambda _, fitted: sent.append((list(d.messages(fitted.body)), fitted.report.cut)),
    )
    r = row(name, base, guarded)
    assert r["rejected"] == 0 and r["cut"] >= 30
    assert r["new_cuts"] <= 4, r["new_cuts"]
    assert r["bill_over"] <= 1.0, r["bill_over"]
    assert r["room_min"] >= 0.6
    carried = 0
    for (before, was), (after, now) in zip(sent, sent[1:]):
        if now is None or now != was:
            continue
        carried += 1
        k = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), None)
        # the guard stops sending a message only where the client changed it
        assert k is None or before[k] not in after, (k, now)
    assert carried >= 30


def test_a_moving_cache_breakpoint_changes_no_cut():
    name, body = SWE[1]  # the /v1/messages form
    policy = window_policy(body, 0.5)
    plain = replay(name, body, policy)
    moved = replay(name, with_client(body, breakpoints(2)), policy)
    assert [t.new_cut for t in moved.turns] == [t.new_cut for t in plain.turns]


def _new_cuts(engine: Engine, turns: list[dict[str, Any]], dialect: str, recorded: bool) -> int:
    """How many times the cut sent changes over the turns (its prefix or mark), every turn fitting;
    without the record, each turn is judged warm by the caller (nothing is recorded)."""
    cuts, previous = 0, None
    for turn in turns:
        judged = Judged() if recorded else Judged(temperature=Temperature("warm"))
        fitted = run(engine.plan_for(FitRequest(turn, dialect=dialect, judged=judged)))
        report = fitted.report
        assert report.fits and report.input_tokens_after <= report.room
        cut = report.carried and (report.carried["length"], report.carried["mark"])
        cuts += bool(cut) and cut != previous
        previous = cut
    return cuts


@settings(max_examples=max(40, settings.default.max_examples // 5))  # (each example replays a loop twice)
@given(long_agent_loop(), st.integers(2, 6))
def test_a_loop_whose_client_stubs_old_results_is_cut_anew_no_more_often_with_the_record(case, keep):
    """Generated loops of 20-40 turns at a fifth to a half of their size, the client stubbing all
    but its newest `keep` results: with the conversation's record the guard makes no more new cuts
    than the replay alone (150 random examples: 1.35 against 3.61 on average, fewer on 69, more on none)."""
    body, settings_ = case[0], sized(*case)
    d = by_name(settings_["dialect"])
    key = "input" if "input" in body else "messages"
    client = last_n_observations(keep)
    turns = [{**turn, key: client(d, _turns(turn))} for turn in _growing(body)]
    recorded = _new_cuts(_engine(settings_), turns, settings_["dialect"], recorded=True)
    replayed = _new_cuts(_engine(settings_), turns, settings_["dialect"], recorded=False)
    assert recorded <= replayed


def test_two_workers_sharing_the_record_cut_an_edited_loop_as_one_does():
    """Turns of a loop whose client stubs old results, sent alternately through two engines (two
    workers or replicas) whose records meet in the shared store: the same cuts, turn by turn, as
    through one engine."""
    import asyncio

    from bench.cache import engine_for, fit, requests
    from guard.state.cache import CacheSettings, SummaryCache
    from guard.state.seen_store import SeenStore
    from tests.test_temperature import FakeRedis

    name, body = SWE[0]
    policy = window_policy(body, 0.5)
    turns = list(requests(with_client(body, last_n_observations(5))))
    one = engine_for(body, policy)
    alone = [fit(one, turn, None).report.carried for turn in turns]
    shared = FakeRedis()
    engines = [engine_for(body, policy), engine_for(body, policy)]
    stores = [SeenStore(SummaryCache(CacheSettings(memory_entries=0), shared=shared), e.conversations) for e in engines]
    both = []
    for i, turn in enumerate(turns):
        engine, store = engines[i % 2], stores[i % 2]
        key = engine.conversation_key(turn, turn["model"])
        assert asyncio.run(store.fresh(key))
        both.append(fit(engine, turn, None).report.carried)
        asyncio.run(store.record(key))
    assert sum(c is not None for c in alone) >= 30
    assert both == alone


def test_the_requests_a_real_run_sent_keep_the_guards_cut_where_the_run_rewrote_its_last_exchange():
    """Moatless Tools stores every request its run sent (bench/corpus/agents, `moatless_requests`):
    a breakpoint moved every turn, and on this run the last exchange (a retried action) rewritten on
    19 turns. Replayed as sent at half its size: before the record (and before the record's
    identity left the rewritten last reply out), 10 new cuts and 0.99x the untrimmed requests'
    bill over the overflowing turns; measured 4 and 0.80."""
    (name, body) = next((n, b) for n, b in loops() if n == "moatless_requests/django__django-12284")
    assert len(body["x_requests"]) == 29
    base = replay(name, body, None)
    guarded = replay(name, body, window_policy(body, 0.5))
    r = row(name, base, guarded, body)
    assert r["best_bill_over"] is None  # (the yardsticks cut a history as appended: none here)
    assert r["rejected"] == 0 and r["cut"] >= 20
    assert r["new_cuts"] <= 5, r["new_cuts"]
    assert r["bill_over"] <= 0.9, r["bill_over"]
    assert r["room_min"] >= 0.6
