"""Clients that keep a window of their newest messages (`bench.clients.sliding`: AutoGen's buffered
context, LangChain's `trim_messages`, OpenHands' recent-events condenser): past the window, every
turn takes the oldest messages after the task out, so the untrimmed loop's cached prefix ends at
the task on every turn. Where all the client took out are messages the guard's carried cut already
left out, the guard finds its cut in the slid history and carries it (`guard.fit.slid`), its
marker still counting what it stands for: the prompt is the previous one plus what the client added.
Before session 72 it cut anew on every such turn, breaking the cached prefix right after the task."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import cache
from bench.clients import Client, estimated, sliding, trimmed, within
from bench.sweep import _loops
from guard.dialects import by_name, detect
from guard.fit.conversation import Conversation, Keeping
from guard.fit.edited import LastCut
from guard.fit.engine import Engine
from guard.fit.slid import slid_to
from guard.fit.strategies.compact import compacted
from tests.strategies import long_agent_loop
from tests.test_carry_while_fits import _engine
from tests.test_properties import _growing

EXAMPLES = {"ci": 50, "dev": 10}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 1000)


def _turns_where_the_carried_cut_fits(
    engine: Engine,
    dialect_name: str,
    turns: list[dict[str, Any]],
    window: int | Client,
    summarizer: cache.Scripted | None = None,
):
    """Each turn of `turns` as a client keeping its newest `window` messages (or as `window`, a
    client, edits it) sends it, through `engine` (its summary requests answered by `summarizer`,
    if any): (turns checked, turns whose prompt did not start with the previous one though the
    client took out only messages of the first run the previous turn's cut left out, that prompt
    plus what the client added since fits the room, and the request does not fit whole: a request
    that fits goes as the client sent it)."""
    dialect, client = by_name(dialect_name), sliding(window) if isinstance(window, int) else window
    model = turns[0]["model"]
    counter = engine.counter_and_factor(model, engine.policy_for(model))[0]
    checked, broken = 0, []
    last: tuple[list[Any], list[Any]] | None = None  # the previous turn's messages as asked and as sent
    for t, turn in enumerate(turns):
        asked = client(dialect, list(dialect.messages(turn)))
        body = {**turn, dialect.messages_key: asked}
        fitted = cache.fit(engine, body, summarizer, dialect_name)
        sent = list(dialect.messages(fitted.body))
        if last is not None and last[1] != last[0]:
            was_asked, was_sent = last
            went = [i for i, m in enumerate(was_asked) if m not in was_sent and compacted(dialect, m) not in was_sent]
            first = [i for k, i in enumerate(went) if i - k == went[0]] if went else []  # its first run
            gone = [i for i, m in enumerate(was_asked) if m not in asked]
            added = asked[asked.index(was_asked[-1]) + 1 :] if was_asked[-1] in asked else None
            if added is not None and gone and set(gone) <= set(first) and sent != asked:
                carry = counter.fixed(dialect, fitted.body) + sum(counter.messages(dialect, was_sent))
                carry += sum(counter.messages(dialect, [compacted(dialect, m) for m in added]))
                if carry <= fitted.report.room:
                    checked += 1
                    if sent[: len(was_sent)] != was_sent:
                        broken.append(t)
        last = (asked, sent)
    return checked, broken


@pytest.mark.parametrize("name", ["moatless/django__django-13220", "openhands/sphinx-doc__sphinx-7757"])
def test_a_real_loop_whose_client_slides_its_window_keeps_the_cut_it_carries(name):
    """Two real loops, their client keeping its newest 20 messages, at half the size of its largest
    request: on every turn where the client took out only what the carried cut left out and the
    previous prompt plus what it added fits, the prompt starts with the previous one (session 71's
    guard broke every one of them)."""
    body = dict(dict(_loops(None, None))[name])
    policy = cache.window_policy(cache.with_client(body, sliding(20)), 0.5)
    engine = cache.engine_for(body, policy)
    checked, broken = _turns_where_the_carried_cut_fits(engine, detect(body).name, list(cache.requests(body)), 20)
    assert checked >= 3 and broken == []


@pytest.mark.parametrize(
    "name", ["minisweagent/gemini3_django__django-13821", "minisweagent/gemini3_sympy__sympy-14531"]
)
def test_a_text_agent_whose_client_trims_its_history_to_a_token_budget_keeps_the_cut_it_carries(name):
    """Two real loops of a text agent (its observations sent as user messages), their client keeping
    the newest messages within 16k tokens, at half the size of its largest request: a turn may slide
    past many messages, or fewer than it adds, and leave an observation right after the task. On
    every turn where the client took out only what the carried cut left out and the previous prompt
    plus what it added fits, the prompt starts with the previous one (before session 73 the guard
    read such an observation as the task's request and pinned it, and a turn shorter than the last
    one did not try the last cut: both loops broke on such turns)."""
    body = dict(dict(_loops(None, None))[name])
    policy = cache.window_policy(cache.with_client(body, trimmed(16)), 0.5)
    engine = cache.engine_for(body, policy)
    checked, broken = _turns_where_the_carried_cut_fits(
        engine, detect(body).name, list(cache.requests(body)), trimmed(16)
    )
    assert checked >= 3 and broken == []


@pytest.mark.parametrize(
    ("name", "client"),
    [("moatless/django__django-13220", sliding(20)), ("minisweagent/gemini3_django__django-13821", trimmed(16))],
)
def test_a_slid_cut_keeps_the_summary_its_last_turn_sent(name, client):
    """With a summarizer, a carried cut sends a summary of what it dropped; the client then slides
    out messages that summary stands for. On every turn where the client took out only what the
    carried cut left out and the previous prompt plus what it added fits, the prompt starts with the
    previous one, the summary as it was (found in the summary cache by its span's digest, never
    asked for again: its messages are gone). Before session 74 such a cut was made anew, with a
    summary of what was left (bench.sweep --summarize --client sliding:20: 1,444 needless breaks at
    50%)."""
    body = dict(dict(_loops(None, None))[name])
    policy = cache.window_policy(cache.with_client(body, client), 0.5)
    engine, summarizer = cache.engine_for(body, policy), cache.Scripted()
    checked, broken = _turns_where_the_carried_cut_fits(
        engine, detect(body).name, list(cache.requests(body)), client, summarizer
    )
    assert checked >= 3 and broken == []
    assert summarizer.calls >= 1


@settings(max_examples=EXAMPLES, deadline=None)
@given(long_agent_loop(dialects=("openai", "anthropic")), st.booleans())
def test_a_drawn_loop_whose_client_slides_its_window_keeps_the_cut_it_carries(case, summarized):
    """Growing conversations squeezed to a fifth to a half of their size, their client keeping its
    newest messages, two thirds of the loop's, with a summarizer or without: the same, on every
    turn where the carried cut still fits."""
    body, settings_ = case
    dialect = settings_["dialect"]
    turns = _growing(body)
    full = _engine(dialect, 10**7, settings_).fit(turns[-1], dialect=dialect).report.input_tokens_before
    engine = _engine(dialect, int(full * settings_["share"]) + 1024, settings_)
    window = len(by_name(dialect).messages(turns[-1])) * 2 // 3
    summarizer = cache.Scripted() if summarized else None
    _, broken = _turns_where_the_carried_cut_fits(engine, dialect, turns, window, summarizer)
    assert broken == []


@settings(max_examples=EXAMPLES, deadline=None)
@given(long_agent_loop(dialects=("openai", "anthropic")), st.floats(0.4, 0.9), st.booleans())
def test_a_drawn_loop_whose_client_trims_it_to_a_token_budget_keeps_the_cut_it_carries(case, budget, summarized):
    """The same, the client keeping the newest messages within a budget of 40-90% of the loop's
    size (estimated as the client estimates it): a turn may slide past many messages, or fewer than
    it adds."""
    body, settings_ = case
    dialect = settings_["dialect"]
    turns = _growing(body)
    full = _engine(dialect, 10**7, settings_).fit(turns[-1], dialect=dialect).report.input_tokens_before
    engine = _engine(dialect, int(full * settings_["share"]) + 1024, settings_)
    client = within(int(budget * sum(estimated(m) for m in by_name(dialect).messages(turns[-1]))))
    summarizer = cache.Scripted() if summarized else None
    _, broken = _turns_where_the_carried_cut_fits(engine, dialect, turns, client, summarizer)
    assert broken == []


def _messages(counts: list[int]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "task"}] + [
        {"role": "assistant" if i % 2 else "user", "content": f"x{i}"} for i in range(1, len(counts))
    ]


def _record(counts: list[int], dropped: tuple[tuple[int, int], ...], length: int) -> LastCut:
    kept = [i for i in range(length) if not any(a <= i < b for a, b in dropped)]
    return LastCut.of(by_name("openai"), _messages(counts), counts, (length, 500), kept=kept)


def test_a_record_is_found_in_its_history_slid_only_where_the_client_took_out_what_it_dropped():
    counts = [10, 11, 12, 13, 14, 15, 16, 17, 18]
    record = _record(counts, ((1, 5),), 7)
    dialect = by_name("openai")
    slid = [10, 13, 14, 15, 16, 17, 18, 19]  # two of the four it dropped taken out, one message added
    found = slid_to(record, dialect, _messages(slid), slid)
    assert found is not None
    assert (found.length, found.history, found.dropped, found.slid) == (5, 7, ((1, 3),), 2)
    assert found.taken_from_dropped(slid) == 11 + 12 and found.taken(slid) == 0
    assert slid_to(record, dialect, _messages(c := [10, 14, 15, 16, 17, 18, 19]), c).slid == 3
    whole = slid_to(record, dialect, _messages(c := [10, 15, 16, 17, 18, 19]), c)  # the whole run: its marker stays
    assert whole is not None and (whole.dropped, whole.slid, whole.taken(c)) == (((1, 1),), 4, 0)
    assert slid_to(record, dialect, _messages(c := [10, 16, 17, 18, 19]), c) is None  # a kept one went too
    assert slid_to(record, dialect, _messages(c := [10, 13, 14, 15, 99, 17, 18]), c) is None  # one kept changed
    assert LastCut.from_dict(found.to_dict()) == found


def _no_text(record: Mapping[str, Any]) -> bool:
    return all(not isinstance(v, str) or len(v) <= 32 for v in record.values())


def test_the_record_of_a_slid_cut_holds_counts_and_digests_only():
    record = _record([10, 11, 12, 13, 14, 15, 16], ((1, 4),), 5)
    assert record.window and _no_text(record.to_dict())
    # with a summary: its span's digest (sha256, hex), budget, mark and room, read back as written;
    # a record an earlier version wrote, without them, reads as one that sent no summary
    digest = hashlib.sha256(b"lines").hexdigest()
    summarized = replace(record, summary=digest, summary_budget=364, summary_mark=6720, summary_room=559)
    data = summarized.to_dict()
    assert LastCut.from_dict(data) == summarized and all(len(v) <= 64 for v in data.values() if isinstance(v, str))
    older = {k: v for k, v in data.items() if not k.startswith("summary")}
    assert LastCut.from_dict(older) == record


def test_two_workers_sharing_the_record_carry_a_slid_cut_as_one_does():
    """Turns of a real loop whose client slides a window of its newest 20 messages, sent
    alternately through two engines (two workers or replicas) whose records meet in the shared
    store: the same cuts, turn by turn, as through one engine (the record alone knows what the
    client took out)."""
    from tests.test_edited import carried_alone_and_by_two_workers

    body = dict(dict(_loops(None, None))["moatless/django__django-13220"])
    edited = cache.with_client(body, sliding(20))
    alone, both = carried_alone_and_by_two_workers(body, cache.window_policy(edited, 0.5), list(cache.requests(edited)))
    assert sum(c is not None and c["slid"] > 0 for c in alone) >= 3
    assert both == alone


def test_two_workers_sharing_the_record_and_the_summary_cache_carry_a_slid_summary_as_one_does():
    """The same with a summarizer, the two workers sharing its summary cache: the record names the
    summary a slid cut keeps by its span's digest and budget, which the other worker finds."""
    from tests.test_edited import carried_alone_and_by_two_workers

    body = dict(dict(_loops(None, None))["moatless/django__django-13220"])
    edited = cache.with_client(body, sliding(20))
    policy = cache.window_policy(edited, 0.5)
    alone, both = carried_alone_and_by_two_workers(body, policy, list(cache.requests(edited)), summarizing=True)
    assert sum(c is not None and c["slid"] > 0 and c["summary"] != "" for c in alone) >= 3
    assert both == alone


def test_the_task_of_a_history_edited_since_a_cut_is_before_the_cut_s_first_run():
    """A text agent's observation the client left right after the task (it slid out the reply it
    answered) reads as the task's request (`task_messages`), and is pinned; where a carried cut's
    first dropped run starts there, it is not (`Keeping.task_before`): the cut is made again as it was."""
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix the bug"},
        {"role": "user", "content": "<returncode>0</returncode><output>a.py</output>"},
        {"role": "assistant", "content": "cat a.py"},
        {"role": "user", "content": "<returncode>0</returncode><output>print(1)</output>"},
        {"role": "assistant", "content": "done"},
    ]
    dialect, counts = by_name("openai"), [5, 5, 9, 4, 9, 2]
    pinned = Conversation.build(dialect, messages, counts, 0, Keeping(recent_groups=1)).pinned
    assert pinned[:4] == (True, True, True, False)
    edited = Conversation.build(dialect, messages, counts, 0, Keeping(recent_groups=1, task_before=2)).pinned
    assert edited[:4] == (True, True, False, False)
