"""Cuts carried from the last band crossing (issue 24): a loop's cut is decided on the prefix up to
the turn where it crossed its band, so every turn until the next crossing sends the same cut."""

from __future__ import annotations

import json
from typing import Any

from bench.cache import replay, row, window_policy
from bench.traces import coding_trace, to_text_agent
from guard.core.config import Deployment
from guard.core.policy import Policy, PolicySet
from guard.dialects import by_name
from guard.fit.engine import Engine
from guard.fit.notes import NOTE_MARK
from guard.fit.replay import Past, last_cut


def _sizes(sizes):
    """A size_of that answers from a table (cut prefix length -> its tokens) and records its calls."""
    asked = []

    def size_of(m, mark):
        asked.append((m, mark))
        return sizes.get(m)
        yield  # (a generator, as the real one)

    return size_of, asked


def _budget(room):
    from guard.core.budget import Budget
    from guard.core.limits import ModelLimits

    return Budget(ModelLimits("m", room, 0, "separate", "test"), 0, 0, 1.0, 0.35)


def _drive(gen):
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _tool_turns(n):
    """A task and `n` turns of one tool call and its result each (chat messages)."""
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msgs = [{"role": "user", "content": "task"}]
    for t in range(n):
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [{**call, "id": f"c{t}"}]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": "x"},
        ]
    return msgs


def test_the_last_cut_is_kept_while_it_fits_and_a_new_one_made_where_it_stops():
    chat = by_name("openai")
    msgs = _tool_turns(10)
    counts = (10,) + (5, 45) * 10  # turns of 50 tokens: 60, 110, ..., 510 after each
    budget = _budget(200)  # room 200, room bar 120, band 70: the 4th turn (9 messages, 210) is the first over it
    # its cut made 120 tokens: carried while 120 + what was added since fits (the 5th turn: 170;
    # the 6th: 220 does not); the 6th's cut (150) through the 7th (200); the 8th's (140) through the 9th
    size_of, asked = _sizes({9: 120, 13: 150, 17: 140})
    m, mark = _drive(last_cut(Past(chat, tuple(msgs[:19]), counts[:19], counts[:19], 0), budget, size_of))
    assert [a for a, _ in asked] == [9, 13, 17] and m == 17
    # the mark: turns of 50 tokens are a quarter of the room, so a whole-turn cut that keeps the
    # bar lasts only where it leaves 50 free (`turn_growth`, session 37): the one at 160 does not,
    # so the cut goes under the bar to the largest whole-turn cut there (110), its mark a marker
    # over it, under the bar (119); before, halfway between the band's bottom and the bar (125)
    assert mark == 119 and all(mk == 119 for _, mk in asked)

    # where it leaves 110 under that mark: taken as it is (under the bar by design, not raised)
    def low(m, mark):
        return 110 if mark < 160 else 160
        yield

    assert _drive(last_cut(Past(chat, tuple(msgs[:9]), counts[:9], counts[:9], 0), budget, low)) == (9, 119)
    # in a room where those turns are small (room 600: a quarter band of 52 over a turn's 50), a
    # whole-turn cut over the bar lasts; where the low marks leave less than the bar (360), the
    # smallest whole-turn cut over the band's bottom (390) is taken: the task and eight turns, 410
    big, many, msgs_many = _budget(600), (10,) + (5, 45) * 20, _tool_turns(20)

    def low_big(m, mark):
        return 300 if mark < 410 else 410
        yield

    assert _drive(last_cut(Past(chat, tuple(msgs_many[:25]), many[:25], many[:25], 0), big, low_big)) == (25, 410)
    # the same history answers the same, with or without the later turns (a pure function of it)
    assert (
        _drive(
            last_cut(Past(chat, tuple(msgs[:15]), counts[:15], counts[:15], 0), budget, _sizes({9: 120, 13: 150})[0])
        )[0]
        == 13
    )
    assert (
        _drive(last_cut(Past(chat, tuple(msgs), counts, counts, 0), budget, _sizes({9: 120, 13: 150, 17: 140})[0]))[0]
        == 21
    )
    # a request that fits is not cut at all
    assert _drive(last_cut(Past(chat, tuple(msgs[:7]), counts[:7], counts[:7], 0), budget, size_of)) is None
    # a cut that could not be made is left at the next turn boundary
    size_of, asked = _sizes({})
    assert _drive(last_cut(Past(chat, tuple(msgs[:13]), counts[:13], counts[:13], 0), budget, size_of))[0] == 13
    assert sorted({a for a, _ in asked}) == [9, 11, 13]


def test_a_band_over_forty_percent_of_the_room_cuts_to_its_floor_without_raising_the_mark():
    """With `cut_quantum_ratio` 0.5 the band's bottom (half the room) is under the room bar (60%):
    such a band cuts below the bar by design, so its mark is not raised toward the bar. (It was, in
    effect, only where the band-quantized stop under a raised mark happened to allow it; once a
    carried prefix stopped at its mark, big bands were raised to the bar on every new cut: bench.cache
    at band 0.5, median bill over 0.82 -> 0.85. Cutting to the floor: 0.67, room used median 0.72.)"""
    from guard.core.budget import Budget
    from guard.core.limits import ModelLimits
    from guard.fit.replay import choose_mark, low_water, room_bar

    budget = Budget(ModelLimits("m", 200, 0, "separate", "test"), 0, 0, 1.0, 0.5)  # room 200, band 100
    assert budget.floor == 100 and room_bar(budget) == 120
    chat = by_name("openai")
    msgs = [{"role": "user", "content": "task"}] + [{"role": "assistant", "content": "x"}] * 4
    past = Past(chat, tuple(msgs), (10, 60, 60, 60, 60), (10, 60, 60, 60, 60), 0)
    marks = low_water(past, 5, budget)
    assert marks == (100,)
    asked = []

    def size_of(m, mark):  # a cut lands a little under its mark
        asked.append(mark)
        return mark - 5
        yield

    assert _drive(choose_mark(5, marks, budget, size_of)) == (100, 95) and asked == [100]


def test_where_no_whole_turn_cut_keeps_the_room_bar_a_new_cut_drops_whole_turns_under_it():
    """Turns that are a large share of the room (a file read of 75% of it): no whole-turn cut lands
    between the room bar and the room, so the cut goes to the largest whole-turn cut under the bar
    (its mark a marker's slack over it) and its mark is not raised toward the bar, which only
    truncating the large result could reach (session 34: kept truncated, such a cut lasted until
    the loop's last turn needed another, 1.11 of the untrimmed loop's bill against the best cuts'
    0.58), however little of the room it keeps (session 35: a quarter-of-the-room floor left two
    held-out loops at 1.001 and 0.628 against the best cuts' 0.563 and 0.441). Where a whole-turn
    cut keeps the bar, as before."""
    from guard.fit.replay import FIRST_MARK_SLACK, choose_mark, low_water, room_bar

    budget = _budget(2000)  # room 2000, bar 1200, band 700: the band's bottom 1300
    assert room_bar(budget) == 1200 and budget.floor == 1300
    chat = by_name("openai")
    msgs = _tool_turns(3)

    def marks(read: int, later: int = 200) -> tuple[int, ...]:
        counts = (100, 50, read, 50, later, 50, later)  # whole-turn cuts: all, the task + 2 turns, + 1
        return low_water(Past(chat, tuple(msgs), counts, counts, 0), 7, budget)

    # the read (1,500) leaves 2,150 and whole-turn cuts of 600 and 350: none between 1,200 and 2,000
    assert marks(1500) == (600 + FIRST_MARK_SLACK,)
    asked = []

    def size_of(m, mark):  # the drop lands under its mark
        asked.append(mark)
        return 600 if mark < 1200 else mark - 20
        yield

    assert _drive(choose_mark(7, marks(1500), budget, size_of)) == (664, 600) and asked == [664]
    # smaller later turns: the whole-turn cuts under the bar keep a fifth of the room and less
    # (400 and 250 tokens): the larger of them all the same, not truncation up to the bar
    assert marks(1800, later=100) == (400 + FIRST_MARK_SLACK,)
    # a read of 1,000 among larger turns: the task and two turns keep 1,300, over the bar: as before
    assert min(marks(1000, later=550)) >= 1200


def _engine(window: int, **policy) -> Engine:
    return Engine(
        PolicySet(defaults=Policy(default_max_tokens=256, safety_margin_tokens=0, safety_margin_ratio=0.0, **policy)),
        deployments={"small": Deployment("small", "gpt-4o", {"max_input_tokens": window})},
        model_map={},
    )


def test_turns_between_crossings_send_the_same_cut_and_report_where_it_was_decided():
    body = coding_trace(turns=120, seed=5)
    engine = _engine(20_000)
    previous = None
    carried = 0
    for end in range(60, len(body["messages"]) + 1, 2):
        fitted = engine.fit({**body, "messages": body["messages"][:end]}, model="small")
        report = fitted.report
        if report.cut is None:
            continue
        assert report.cut_from is not None and report.cut_from <= end
        if previous is not None and previous.report.cut == report.cut:
            carried += 1
            assert report.cut_from == previous.report.cut_from
            sent, before = fitted.body["messages"], previous.body["messages"]
            assert json.dumps(sent[: len(before)]) == json.dumps(before)
        previous = fitted
    assert carried >= 20


def test_a_question_asked_after_the_crossing_about_a_cut_fact_gets_it_back_in_a_note_the_cache_keeps():
    """A fact only an old, cut tool result holds, asked about after the crossing: the carried cut
    stays byte for byte (the provider's cached prefix holds) and the line that holds the fact
    comes back in a note of the guard's own just before the question; a question about what the
    kept messages still have gets none. The next turn, whose answer names the fact, sends the
    note again, byte for byte (judged on what came before the question)."""
    body = coding_trace(turns=120, seed=6)
    msgs = [dict(m) for m in body["messages"]]
    old = next(i for i, m in enumerate(msgs) if m["role"] == "tool" and len(m["content"]) > 2000 and i > 60)
    msgs[old]["content"] = (
        msgs[old]["content"][:1000]
        + "\n# the rollback key of the zephyr cluster is Q731-5520\n"
        + msgs[old]["content"][1000:]
    )
    engine = _engine(22_000)
    plain = engine.fit({**body, "messages": msgs}, model="small")
    assert "Q731-5520" not in json.dumps(plain.body)  # cut with the task as the question
    question = {"role": "user", "content": "What is the rollback key of the zephyr cluster?"}
    asked = engine.fit({**body, "messages": [*msgs, question]}, model="small")
    sent = asked.body["messages"]
    assert sent[: len(plain.body["messages"])] == plain.body["messages"]  # the cached prefix holds
    assert asked.report.cut == plain.report.cut and asked.report.cut_from == plain.report.cut_from
    note, last = sent[-2], sent[-1]
    assert last == question
    assert note["role"] == "user" and note["content"].startswith(NOTE_MARK)
    assert "Q731-5520" in note["content"] and note["content"].count("\n") <= 4
    counter, _ = engine.counter_for("small", engine.policy_for("small"))
    tokens = counter.message(by_name("openai"), note)
    assert asked.report.note == {"before_message": len(msgs), "lines": note["content"].count("\n"), "tokens": tokens}
    assert asked.report.input_tokens_after <= asked.report.room
    nudged = engine.fit(
        {**body, "messages": [*msgs, {"role": "user", "content": "Keep going with the tests."}]}, model="small"
    )
    assert nudged.report.note is None and nudged.report.cut == plain.report.cut
    assert not any(NOTE_MARK in json.dumps(m) for m in nudged.body["messages"])
    answered = engine.fit(
        {
            **body,
            "messages": [
                *msgs,
                question,
                {"role": "assistant", "content": "The rollback key of the zephyr cluster is Q731-5520."},
                {"role": "user", "content": "Thanks. Now roll it back."},
            ],
        },
        model="small",
    )
    assert answered.report.cut == asked.report.cut and answered.report.note == asked.report.note
    assert answered.body["messages"][: len(sent)] == sent


def test_a_text_based_agent_whose_every_turn_is_a_user_message_keeps_its_cuts():
    """Each tool output arrives as a user message, so every turn asks a new question: at most
    one of them per band moves the cut (the old guard re-cut almost every turn: 65-80 breaks,
    4.2-4.5x the untrimmed loop's Anthropic bill)."""
    body = to_text_agent(coding_trace(turns=160, seed=2))
    base = replay("text", body, None)
    run = replay("text", body, window_policy(body, 0.5))
    r = row("text", base, run, body)
    assert r["unmarked"] == 0 and r["rejected"] == 0
    assert r["breaks"] <= 8 and r["anthropic"] <= 1.1


def test_a_carried_prefix_is_fitted_once_per_engine_and_sent_the_same(monkeypatch):
    """A cut carried turn after turn: its prefix is fitted on the turn that made it, and each later
    turn reuses that fit (the fast path); a fresh engine (a new worker) fits it again and sends the
    same bytes and the same report."""
    from guard.fit import carried

    fits: list[tuple[int, int]] = []
    real = carried._fit_prefix

    def counting(cuts, m, mark, question, summaries=False):
        fits.append((m, mark))
        return (yield from real(cuts, m, mark, question, summaries))

    monkeypatch.setattr(carried, "_fit_prefix", counting)
    body = coding_trace(turns=120, seed=5)
    warm = _engine(20_000)
    carried_turns = 0
    for end in range(60, len(body["messages"]) + 1, 2):
        request = {**body, "messages": body["messages"][:end]}
        fits.clear()
        fitted = warm.fit(request, model="small")
        if fitted.report.cut is None or fitted.report.cut_from is None or fitted.report.cut_from == end:
            continue
        carried_turns += 1
        assert fits == [], (end, fits)  # a turn carrying a cut fits nothing again
        fresh = _engine(20_000).fit(request, model="small")
        assert json.dumps(fresh.body) == json.dumps(fitted.body)
        # (a new engine saw no turn: no idle time, and it first sends the cut now: the record's `since`)
        assert fitted.report.carried["since"] <= fresh.report.carried["since"] == end
        assert _but_the_turns_seen(fresh.report) == _but_the_turns_seen(fitted.report)
    assert carried_turns >= 20


def _but_the_turns_seen(report: Any) -> dict[str, Any]:
    """A report's fields but those that say which turns of the conversation its engine served."""
    out = {k: v for k, v in report.to_dict().items() if k != "idle_seconds"}
    return {**out, "carried": {k: v for k, v in out["carried"].items() if k != "since"}}


def test_a_long_context_carried_prefix_is_fitted_once_too(monkeypatch):
    """A carried prefix of a long-context loop (here ~230k tokens of history, cut into gpt-4o's
    window) is kept by the engine like a short one: the next turn carrying it fits nothing again
    (kept only up to a 64th of the memo, ~125k tokens, it was fitted again on every turn: 26 ms a
    turn against 6). Within one request, a past request's cut is fitted once for its size and its
    carry."""
    from bench.cache import requests
    from bench.traces import agent_trace
    from guard.core import memo
    from guard.fit import carried

    fits: list[int] = []
    real = carried._fit_prefix

    def counting(cuts, m, mark, question, summaries=False):
        fits.append(m)
        return (yield from real(cuts, m, mark, question, summaries))

    monkeypatch.setattr(carried, "_fit_prefix", counting)
    *_, before, last = requests(agent_trace(turns=360, seed=3))
    keeps_none = Engine(PolicySet(defaults=Policy(default_max_tokens=4096)))
    keeps_none.memos.prefix_cuts.max_entry = 0  # (an engine that keeps no prefix at all)
    keeps_none.fit(json.loads(json.dumps(before)))
    assert fits and len(fits) == len(set(fits))  # each prefix fitted once in a request all the same
    fits.clear()
    engine = Engine(PolicySet(defaults=Policy(default_max_tokens=4096)))
    first = engine.fit(json.loads(json.dumps(before)))
    m = first.report.cut_from
    assert m is not None and m < len(before["messages"])
    counter, _ = engine.counter_for("gpt-4o", engine.policy_for("gpt-4o"))
    prefix = sum(counter.messages(by_name("openai"), before["messages"][:m]))
    assert 4 * prefix > memo.Memos().prefix_cuts.limit // 64  # over what a default entry may hold
    fits.clear()
    second = engine.fit(json.loads(json.dumps(last)))
    assert (second.report.cut_from, second.report.cut) == (m, first.report.cut)
    assert fits == []


def test_a_key_collision_never_sends_another_conversations_prefix(monkeypatch):
    """The fast path's memo is keyed by hashes; a hit must hold the very messages of this prefix."""
    from guard.fit import prefix_forms

    monkeypatch.setattr(prefix_forms.PrefixKeys, "__call__", lambda self, m, mark: ("collide", m, mark))
    engine = _engine(20_000)
    a = coding_trace(turns=120, seed=5)
    b = json.loads(json.dumps(a))  # the same conversation but for one old result's secret
    old = next(i for i, m in enumerate(b["messages"]) if m["role"] == "tool" and i > 4)
    a["messages"][old] = {**a["messages"][old], "content": "the vault code is 1111\n" + a["messages"][old]["content"]}
    b["messages"][old] = {**b["messages"][old], "content": "the vault code is 2222\n" + b["messages"][old]["content"]}
    for body in (a, b):
        for end in range(80, len(body["messages"]) + 1, 10):
            fitted = engine.fit({**body, "messages": body["messages"][:end]}, model="small")
            alone = _engine(20_000).fit({**body, "messages": body["messages"][:end]}, model="small")
            assert json.dumps(fitted.body["messages"]) == json.dumps(alone.body["messages"])


def test_the_replay_cuts_only_where_a_request_was_sent():
    """A past request ended where the history does not end with a reply of the model's: not
    between the model's answer and the client's next words (no request held that history), in
    each dialect; between two messages of the client's it may have (a client that adds its own
    messages turn after turn without a reply between them), but not between tool results and the
    client's next message."""
    chat = by_name("openai")
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "q3"},
    ]
    past = Past(chat, tuple(msgs), (1,) * 8, (1,) * 8, 0)
    assert past.starts == [1, 2, 3, 4, 6, 7]  # every turn group
    assert past.requests == [1, 2, 4, 6]  # not after a1 or a2: the client's next words came first
    responses = by_name("responses")
    items = [
        {"role": "user", "content": "q1"},
        {"type": "reasoning", "id": "r1", "summary": []},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "r"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"role": "user", "content": "q2"},
    ]
    past = Past(responses, tuple(items), (1,) * 6, (1,) * 6, 0)
    assert past.starts == [1, 4, 5] and past.requests == [1, 4]
    anthropic = by_name("anthropic")
    turns = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "q2"},
    ]
    assert Past(anthropic, tuple(turns), (1,) * 5, (1,) * 5, 0).requests == [1, 3]
    notes = [{"role": "user", "content": f"note {i}"} for i in range(4)]  # no reply between them
    assert Past(chat, tuple(notes), (1,) * 4, (1,) * 4, 0).requests == [1, 2, 3]
    # an agent that follows each batch of results with its own message (Roo Code's environment
    # details) sent both at once: no request ended between them
    env = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for t in range(2):
        env += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{t}", "type": "function", "function": {}}]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": "r"},
            {"role": "user", "content": f"environment {t}"},
        ]
    past = Past(chat, tuple(env), (1,) * 8, (1,) * 8, 0)
    assert past.starts == [1, 2, 4, 5, 7] and past.requests == [1, 2, 5]
    items = [
        {"role": "user", "content": "task"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "r"},
        {"role": "user", "content": "environment"},
        {"type": "function_call", "call_id": "d", "name": "f", "arguments": "{}"},
    ]
    assert Past(responses, tuple(items), (1,) * 5, (1,) * 5, 0).requests == [1, 4]


def test_an_agent_that_follows_its_results_with_its_own_message_is_cut_where_it_sent_requests():
    """Roo Code sends the state of its environment as a user message after each batch of tool
    results, in the same request. Every new cut is made on a request the client sent, with that
    request's last user message as its question: not on the history up to the results alone, a
    request never sent, whose question would be the previous turn's environment message, kept
    pinned at the cut's end (bench.sweep, roo/file-clear-error-2 at 30% of its size: 0.682 of the
    untrimmed bill -> 0.639, each cut a turn deeper and lasting longer)."""
    engine = _engine(6_000)
    words = [f"w{i}" for i in range(400)]
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "task " * 300}]
    sent, cut_from = set(), set()
    for t in range(40):
        call = {"id": f"c{t}", "type": "function", "function": {"name": "read", "arguments": f'{{"n": {t}}}'}}
        result = " ".join(words[(t * 37) % 200 :][: 60 + (t * 53) % 240])
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{t}", "content": result},
            {"role": "user", "content": f"<environment_details> turn {t} " + "open tabs: a.py b.py " * 20},
        ]
        sent.add(len(msgs))
        report = engine.fit({"model": "small", "messages": list(msgs)}, model="small").report
        if report.cut_from is not None:
            cut_from.add(report.cut_from)
    assert len(cut_from) >= 3
    assert cut_from <= sent, sorted(cut_from - sent)


def test_a_long_system_prompt_keeps_fewer_newest_turns_whole_so_a_cut_lasts_a_band():
    """Where the pinned messages take most of the room (a policy document as the system prompt),
    the newest groups kept whole leave the pinned ones and themselves under the band's bottom: a
    cut can then drop the older of them and last a band of growth, not a turn (the newest group
    always stays)."""
    from guard.core.budget import Budget
    from guard.core.limits import ModelLimits
    from guard.fit.conversation import Conversation, Keeping

    chat = by_name("openai")
    msgs = [{"role": "system", "content": "policy"}, {"role": "user", "content": "task"}]
    for t in range(6):
        msgs += [{"role": "assistant", "content": f"a{t}"}, {"role": "user", "content": f"q{t}"}]
    budget = Budget(ModelLimits("m", 1000, 0, "separate", "test"), 0, 0, 1.0, 0.35)  # band's bottom: 650

    def recent(system_tokens):
        counts = [system_tokens, 10] + [40] * 12
        policy = Policy(keep_recent_groups=3, keep_recent_share=0.5)
        conv = Conversation.build(chat, msgs, counts, 0, Keeping.of(policy, budget))
        return [i for i, (r, p) in enumerate(zip(conv.recent, conv.pinned)) if r and not p]

    # the newest three groups: q5 (pinned: the last user turn), a5 and q4
    assert recent(100) == [11, 12]
    assert recent(520) == [11, 12]  # 570 pinned: a5 and q4 reach the band's bottom, no further
    # 610 pinned: a5 alone stays under it (half of what the pinned leave of the room, 195, would keep q4)
    assert recent(560) == [12]
    assert recent(700) == [12]  # over the band's bottom already: the newest group with content stays


def test_a_client_that_adds_its_own_messages_without_replies_keeps_its_cut():
    """A conversation that grows by the client's messages alone (notes, retrieved passages; no
    reply of the model's between them): each of its turns may have been a request, so a cut made
    on one is carried on the next while it fits (new cuts once per band of growth, not per turn)."""
    engine = _engine(4_000)
    msgs = [{"role": "system", "content": "Answer from the notes."}]
    cuts, previous = [], None
    for i in range(80):
        msgs.append({"role": "user", "content": f"note {i}: " + " ".join(f"fact{i}-{j}" for j in range(40))})
        fitted = engine.fit({"model": "small", "messages": list(msgs)}, model="small")
        if fitted.report.input_tokens_before > fitted.report.room:
            cuts.append(fitted.report.cut)
            if previous is not None and fitted.report.cut == previous[0]:
                assert fitted.body["messages"][: len(previous[1])] == previous[1]
            previous = (fitted.report.cut, fitted.body["messages"])
    assert len(cuts) >= 40
    assert len(set(cuts)) <= len(cuts) // 4  # (each a new cut on every turn: the cache broken on every turn)


def test_the_replay_of_a_history_many_rooms_long_is_bounded_and_sends_the_same():
    """A worker with no record of a conversation's last turn replays its past crossings, a prefix
    fit each: a history many rooms long (a 10,000-message body into a 4k window took 10 s) is
    replayed over its last `REPLAY_ROOMS` rooms only, from a start that moves by half that span
    at a time. On a growing agent loop of ~9 rooms, with the span forced down to 2 rooms, every
    turn sends what the whole replay sends (the crossings fall in step again within the span), and
    a cold fit of the last turn makes fewer prefix fits."""
    from unittest import mock

    from bench.traces import agent_trace
    from guard.fit import carried, replay
    from tests.test_properties import _growing
    from tests.test_strategies import engine

    body = dict(agent_trace(turns=60, seed=5), model="m")
    turns = list(_growing(body))

    def fits(rooms: int) -> tuple[list[str], int]:
        made = 0
        real = carried._fit_prefix

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal made
            made += 1
            return (yield from real(*args, **kwargs))

        with mock.patch.object(replay, "REPLAY_ROOMS", rooms):
            sent = [json.dumps(engine(4000).fit(t).body) for t in turns]
            with mock.patch.object(carried, "_fit_prefix", counted):
                last = engine(4000).fit(turns[-1])
        assert last.report.input_tokens_before > 8 * last.report.room  # (many rooms long)
        return sent, made

    whole, whole_fits = fits(10**6)
    bounded, bounded_fits = fits(2)
    assert bounded == whole
    assert bounded_fits < whole_fits
    assert replay.replay_start(8 * 3000, 3000) == 0 and replay.replay_start(20 * 3000, 3000) == 12 * 3000


def test_a_summary_takes_at_most_a_sixteenth_of_the_room_the_pinned_messages_leave():
    """In a room a long pinned prompt mostly fills, a carried cut's summary is asked for with a
    budget of at most a 16th of what the pinned messages leave (it would make every cut that
    carries it last fewer turns); with a short pinned prompt, the same loop's summaries get more,
    and a policy's `summary_room_ratio` sets the share."""
    from bench.cache import Scripted, fit
    from guard.fit.spans import SummaryRequest

    class Recording(Scripted):
        def __init__(self) -> None:
            super().__init__(fill=0.9)
            self.budgets: list[int] = []

        def answer(self, request):
            if isinstance(request, SummaryRequest):
                self.budgets.append(request.max_tokens)
            return super().answer(request)

    body = coding_trace(turns=90, seed=2)
    assert body["messages"][0]["role"] == "system" and body["messages"][1]["role"] == "user"
    largest = {}
    for words, ratio in ((0, 0.0625), (5000, 0.0625), (5000, 1.0)):
        messages = [{**body["messages"][0], "content": body["messages"][0]["content"] + " policy" * words}]
        messages += body["messages"][1:]
        engine, summarizer = _engine(16_000, summary_room_ratio=ratio), Recording()
        counter, _ = engine.counter_for("gpt-4o", engine.policy_for("small"))
        pinned = counter.fixed(by_name("openai"), body) + sum(counter.messages(by_name("openai"), messages[:2]))
        rooms, summarized = set(), 0
        for end in range(4, len(messages) + 1, 2):
            fitted = fit(engine, {**body, "model": "small", "messages": messages[:end]}, summarizer)
            rooms.add(fitted.report.room)
            summarized += bool(fitted.report.summary and fitted.report.summary.get("summary_tokens"))
        (room,) = rooms
        assert summarizer.budgets and summarized  # summaries were asked for and sent
        assert max(summarizer.budgets) <= (room - pinned) * ratio
        largest[words, ratio] = max(summarizer.budgets)
    assert largest[5000, 0.0625] < largest[0, 0.0625]
    assert largest[5000, 1.0] == 1024  # the policy's summary_room_ratio lifts the cap: summary_max_tokens


def test_a_worker_whose_record_is_of_an_older_turn_carries_its_cut_where_it_fits(monkeypatch):
    """Two workers with no shared store, the turns of a loop spread over them: a worker's record
    is then often of a turn older than the one just before (the other worker served that one). Where
    the recorded cut fits this request it fitted every request in between, so each of them carried
    it: the worker carries it too, with no replay of the history, and sends what one worker would."""
    import random

    from bench.cache import requests
    from guard.fit import carried

    replays: list[int] = []
    real = carried.last_cut

    def counting(past, *args, **kwargs):
        replays.append(len(past.messages))
        return (yield from real(past, *args, **kwargs))

    monkeypatch.setattr(carried, "last_cut", counting)
    turns = list(requests(coding_trace(turns=120, seed=5)))
    one = _engine(20_000)
    alone = [json.dumps(one.fit(json.loads(json.dumps(t)), model="small").body) for t in turns]
    workers, rng = [_engine(20_000), _engine(20_000)], random.Random(3)
    served: list[int] = []  # which worker served each turn
    older = 0  # turns carried from a record of an older turn, with no replay
    for i, turn in enumerate(turns):
        k = rng.randrange(2)
        replays.clear()
        fitted = workers[k].fit(json.loads(json.dumps(turn)), model="small")
        assert json.dumps(fitted.body) == alone[i], i
        before = [j for j, w in enumerate(served) if w == k]
        if before and before[-1] < i - 1 and fitted.report.cut_from not in (None, len(turn["messages"])):
            older += replays == []
        served.append(k)
    assert older >= 10
