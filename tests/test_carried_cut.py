"""Cuts carried from the last band crossing (issue 24): a loop's cut is decided on the prefix up to
the turn where it crossed its band, so every turn until the next crossing sends the same cut."""

from __future__ import annotations

import json

from bench.cache import replay, row, window_policy
from bench.traces import coding_trace, to_text_agent
from guard.core.config import Deployment
from guard.core.policy import Policy, PolicySet
from guard.dialects import by_name
from guard.fit.carried import crossing
from guard.fit.engine import Engine


def test_the_crossing_is_the_first_turn_boundary_in_the_requests_band():
    chat = by_name("openai")
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msgs = [{"role": "user", "content": "task"}]
    for t in range(6):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [{**call, "id": f"c{t}"}]},
                 {"role": "tool", "tool_call_id": f"c{t}", "content": "x"}]
    counts = (10,) + (5, 45) * 6  # turns of 50 tokens: 60, 110, 160, 210, 260, 310 after each
    # target 100, bands of 100: the whole request (310) is in the band (300, 400]; its first turn
    # boundary past 300 ends the 6th turn: the request itself
    assert crossing(chat, tuple(msgs), counts, 0, 100, 100) == len(msgs)
    # without the last turn (260): band (200, 300], first boundary past 200 is after the 4th turn
    assert crossing(chat, tuple(msgs[:-2]), counts[:-2], 0, 100, 100) == 1 + 2 * 4
    # a boundary never splits a call from its result
    assert crossing(chat, tuple(msgs[:-2]), counts[:-2], 0, 100, 75) % 2 == 1


def _engine(window: int) -> Engine:
    return Engine(PolicySet(defaults=Policy(default_max_tokens=256, safety_margin_tokens=0, safety_margin_ratio=0.0)),
                  deployments={"small": Deployment("small", "gpt-4o", {"max_input_tokens": window})}, model_map={})


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


def test_a_question_asked_after_the_crossing_about_a_cut_fact_moves_the_cut_once():
    """A fact only an old, cut tool result holds: asked about after the crossing, the prefix is
    cut again with the new question (the fact comes back); asked about a term the kept messages
    still have, the cut stays."""
    body = coding_trace(turns=120, seed=6)
    msgs = [dict(m) for m in body["messages"]]
    old = next(i for i, m in enumerate(msgs) if m["role"] == "tool" and len(m["content"]) > 2000 and i > 60)
    msgs[old]["content"] = msgs[old]["content"][:1000] + "\n# the rollback key of the zephyr cluster is Q731-5520\n" + msgs[old]["content"][1000:]
    engine = _engine(22_000)
    plain = engine.fit({**body, "messages": msgs}, model="small")
    assert "Q731-5520" not in json.dumps(plain.body)  # cut with the task as the question
    asked = engine.fit({**body, "messages": msgs + [{"role": "user", "content": "What is the rollback key of the zephyr cluster?"}]}, model="small")
    assert "Q731-5520" in json.dumps(asked.body["messages"][:-1])
    assert asked.report.cut != plain.report.cut
    nudged = engine.fit({**body, "messages": msgs + [{"role": "user", "content": "Keep going with the tests."}]}, model="small")
    assert nudged.report.cut == plain.report.cut


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
