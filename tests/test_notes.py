"""Notes (guard.fit.notes): what a carried cut removed that a later question asks about comes back
in a message of the guard's own before the question, the cached prefix left as it was sent."""

from __future__ import annotations

import json

from bench.traces import coding_trace, to_anthropic, to_responses
from guard.core.config import Deployment
from guard.core.policy import Policy, PolicySet
from guard.dialects import by_name
from guard.fit.conversation import Context, Conversation, Keeping
from guard.fit.engine import Engine
from guard.fit.marks import Marks
from guard.fit.notes import LINE_CHARS, NOTE_MARK, NOTE_ORIGIN, Note, Removed, with_note
from guard.fit.questions import history_of

CHAT = by_name("openai")


def _removed(messages, drop):
    """A Removed for `messages` with the messages at `drop` cut (one marker in their place)."""
    counts = [10] * len(messages)
    conv = Conversation.build(CHAT, messages, counts, 0, Keeping(1))
    cut = conv.replacing(set(drop), {min(drop): (CHAT.marker("[context-guard: omitted]"), 5)})
    part = Context(counter=None, policy=Policy(), marks=Marks(stop_at=100))  # type: ignore[arg-type]  # (not read)
    part.history = history_of(CHAT, tuple(messages), tuple(counts), True)
    return Removed(cut, part)


def _history():
    return [
        {"role": "system", "content": "You are an operations agent."},
        {"role": "user", "content": "Check the clusters."},
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": "boot log\nzephyr status nominal\nthe rollout key of the zephyr cluster is Q7-55\n"
            + "unrelated line about disks",
        },
        {"role": "assistant", "content": "The clusters look fine."},
        {"role": "user", "content": "Good. Anything else?"},
    ]


def test_the_lines_holding_most_of_the_lost_terms_come_back_within_the_budget():
    removed = _removed(_history(), {2})
    lines = removed.lines_for("What is the rollout key of the zephyr cluster?", [], 10_000)
    assert lines == ["zephyr status nominal", "the rollout key of the zephyr cluster is Q7-55"]  # as they came
    assert all("disks" not in line for line in lines)  # no lost term in it
    # a budget of one line keeps the line with the most lost terms, not the first that has one
    only = removed.lines_for("What is the rollout key of the zephyr cluster?", [], 60)
    assert len(only) == 1 and "Q7-55" in only[0]
    assert removed.lines_for("What is the rollout key of the zephyr cluster?", [], 5) == []


def test_no_lines_where_the_question_is_about_what_the_cut_kept():
    removed = _removed(_history(), {2})
    assert removed.lines_for("Are the clusters fine?", [], 10_000) == []
    # a term the messages after the cut name is not lost either
    assert removed.lines_for("What is the zephyr rollout key?", ["the zephyr rollout key is Q7-55"], 10_000) == []


def test_a_long_line_is_clipped_around_its_first_lost_term():
    history = _history()
    history[2] = {**history[2], "content": "x" * 3000 + " the zephyr rollout key is Q7-55 " + "y" * 3000}
    line = _removed(history, {2}).lines_for("What is the zephyr rollout key?", [], 10_000)[0]
    assert len(line) <= LINE_CHARS and "zephyr rollout key is Q7-55" in line


def test_a_note_goes_before_its_question_in_no_group_a_step_may_cut():
    messages = _history()
    conv = Conversation.build(CHAT, messages, [10] * 5, 0, Keeping(1))
    note = Note(4, CHAT.marker(NOTE_MARK + "\nthe line"), 7, 1)
    noted = with_note(conv, note, 5)
    assert noted.messages[4] is note.message and noted.messages[5] == messages[4]
    assert noted.origin[4] == NOTE_ORIGIN and noted.groups[4] == -1 and noted.recent[4]
    assert noted.total == conv.total + 7


def _engine(window):
    info = {"max_input_tokens": window, "max_output_tokens": 1024}
    return Engine(
        PolicySet(defaults=Policy(safety_margin_tokens=0, safety_margin_ratio=0.0)),
        deployments={"small": Deployment("small", "gpt-4o", info)},
        model_map={},
    )


def _asked(shape):
    body = coding_trace(turns=120, seed=6)
    msgs = [dict(m) for m in body["messages"]]
    old = next(i for i, m in enumerate(msgs) if m["role"] == "tool" and len(m["content"]) > 2000 and i > 60)
    msgs[old]["content"] = msgs[old]["content"][:1000] + "\n# the zephyr rollout key is Q731-5520\n"
    question = {"role": "user", "content": "What is the zephyr rollout key?"}
    plain, asked = {**body, "messages": msgs}, {**body, "messages": [*msgs, question]}
    if shape == "anthropic":
        return to_anthropic(plain), to_anthropic(asked)
    if shape == "responses":
        return to_responses(plain, model="gpt-4o"), to_responses(asked, model="gpt-4o")
    return plain, asked


def test_anthropic_and_responses_bodies_get_the_note_and_keep_their_cached_prefix():
    for shape, key in (("anthropic", "messages"), ("responses", "input")):
        plain, asked = _asked(shape)
        engine = _engine(20_000)
        before = engine.fit(plain, model="small")
        after = engine.fit(asked, model="small")
        assert before.report.cut is not None and after.report.cut == before.report.cut, shape
        sent = after.body[key]
        assert sent[: len(before.body[key])] == before.body[key], shape
        note = sent[-2]
        assert NOTE_MARK in json.dumps(note) and "Q731-5520" in json.dumps(note), shape
        assert after.report.note is not None and after.report.input_tokens_after <= after.report.room
        assert json.dumps(sent[-1]) == json.dumps(asked[key][-1])  # the question, as the client sent it
