"""Each strategy on a conversation built to need it, through the engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.core.config import Deployment
from guard.core.errors import ContextWindowExceeded
from guard.core.policy import STRATEGY_ORDER, Policy, PolicySet
from guard.fit.engine import Engine

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def words(n: int, seed: int = 0) -> str:
    return " ".join(WORDS[(i * 7 + seed) % len(WORDS)] + str((i + seed) % 97) for i in range(n))


def engine(window: int, **policy: Any) -> Engine:
    policy.setdefault("safety_margin_ratio", 0.0)
    policy.setdefault("safety_margin_tokens", 0)
    # the newest keep_recent_groups whole, as these tests of each step's mechanics assume (the share
    # that bounds them: tests/test_properties.py, test_the_share_of_the_newest_turns_...)
    policy.setdefault("keep_recent_share", None)
    deployments = {"m": Deployment("m", "gpt-4o", {"max_input_tokens": window, "max_output_tokens": 1000})}
    return Engine(PolicySet(defaults=Policy(**policy)), deployments=deployments, model_map={})


def agent(results: list[str], last_user: str = "what now?") -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "start"}]
    for i, r in enumerate(results):
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": r})
    msgs.append({"role": "user", "content": last_user})
    return {"model": "m", "messages": msgs, "max_tokens": 100}


def only(*names: str) -> list[str]:
    return [n for n in STRATEGY_ORDER if n in names]


def kinds(report) -> list[str]:
    return [a.kind for a in report.actions]


def test_compact_json_alone_can_fit_and_keeps_data():
    pretty = [json.dumps({"rows": [{"k": i, "v": words(5, i)} for i in range(30)]}, indent=4) for _ in range(3)]
    body = agent(pretty)
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total - 300, strategies=only("compact_json")).fit(body)
    assert kinds(fitted.report) == ["compact_json"]
    for before, after in zip(body["messages"], fitted.body["messages"]):
        if before["role"] == "tool":
            assert json.loads(after["content"]) == json.loads(before["content"])


def test_drop_metadata_keeps_citation_keys():
    docs = [
        {"title": f"t{i}", "url": f"u{i}", "text": words(20, i), "metadata": {"url": f"u{i}", "embedding": [0.5] * 40}}
        for i in range(5)
    ]
    body = agent([json.dumps({"results": docs}), "small", "small2", "small3"])
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total - 200, strategies=only("drop_metadata"), keep_recent_groups=1).fit(body)
    assert kinds(fitted.report) == ["drop_metadata"]
    out = json.loads(fitted.body["messages"][3]["content"])
    assert out["results"][0] == {"title": "t0", "url": "u0", "text": words(20, 0), "metadata": {"url": "u0"}}


def test_metadata_goes_from_the_settled_history_once_over_the_room_even_if_compaction_would_do():
    """Metadata removal, like compaction, is one form per message for as long as the conversation
    is over its room: the settled older results lose their bulky keys on the first turn over it,
    not on whichever later turn compaction stops being enough (that turn would re-send, uncached,
    everything from the oldest result on). A turn that adds less than a band keeps the prefix."""
    docs = [
        {"title": f"t{i}", "text": words(20, i), "metadata": {"url": f"u{i}", "embedding": [0.25] * 30}}
        for i in range(3)
    ]
    results = [json.dumps({"results": docs}, indent=2) for _ in range(8)] + ["r1", "r2"]
    body = agent(results)
    total = engine(100_000).fit(body).report.input_tokens_before
    window = total - 200
    assert engine(window, strategies=only("compact_json")).fit(body).report.fits  # compaction alone would do
    fitted = engine(window, keep_recent_groups=2).fit(body)
    assert kinds(fitted.report) == ["compact_json", "drop_metadata"]
    oldest = json.loads(fitted.body["messages"][3]["content"])
    assert oldest["results"][0]["metadata"] == {"url": "u0"}  # the embedding went, the citation stayed
    grown = json.loads(json.dumps(body))
    grown["messages"] += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "x", "content": "r3"},
    ]
    again = engine(window, keep_recent_groups=2).fit(grown)
    assert again.body["messages"][: len(fitted.body["messages"])] == fitted.body["messages"]


def test_dedupe_keeps_the_first_copy():
    same = words(300)
    body = agent([same, words(10, 3), same, "tail1", "tail2"])
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total - 100, strategies=only("dedupe"), keep_recent_groups=1).fit(body)
    tools = [m["content"] for m in fitted.body["messages"] if m["role"] == "tool"]
    assert tools[0] == same  # older messages stay as sent: the provider's cached prefix holds
    assert tools[2].startswith("[context-guard: duplicate of an earlier tool result")


def test_results_that_share_their_text_but_not_their_images_are_no_duplicates():
    """A computer-use agent's screenshots come back as the same short text beside a new image: two
    such results are not copies of each other (marking the later one a duplicate lost its image).
    Two results equal in every part still are."""

    def shot(url: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": words(300)}, {"type": "image_url", "image_url": {"url": url}}]

    body = agent([shot("https://example.com/a.png"), words(10, 3), shot("https://example.com/b.png"), "t1", "t2"])
    total = engine(100_000).fit(body).report.input_tokens_before
    with pytest.raises(ContextWindowExceeded):
        engine(total - 100, strategies=only("dedupe"), keep_recent_groups=1).fit(body)
    body = agent([shot("https://example.com/a.png"), words(10, 3), shot("https://example.com/a.png"), "t1", "t2"])
    fitted = engine(total - 100, strategies=only("dedupe"), keep_recent_groups=1).fit(body)
    tools = [m["content"] for m in fitted.body["messages"] if m["role"] == "tool"]
    assert tools[0] == shot("https://example.com/a.png")
    assert tools[2][0]["text"].startswith("[context-guard: duplicate of an earlier tool result")


def test_dedupe_never_edits_the_newest_turns():
    same = words(300)
    body = agent([same, words(10, 3), same])
    total = engine(100_000).fit(body).report.input_tokens_before
    with pytest.raises(ContextWindowExceeded):  # the only copy it could mark is in the newest turn
        engine(total - 100, strategies=only("dedupe"), keep_recent_groups=2).fit(body)
    fitted = engine(total - 100, strategies=only("dedupe"), keep_recent_groups=1).fit(body)
    assert [m["content"] for m in fitted.body["messages"] if m["role"] == "tool"][2].startswith(
        "[context-guard: duplicate"
    )


def test_dedupe_removes_items_seen_earlier():
    doc = {"id": 1, "title": "x", "text": words(100)}
    older = json.dumps({"results": [doc]})
    newer = json.dumps({"results": [doc, {"id": 2, "text": "unique"}]})
    body = agent([older, newer, "r1", "r2"])
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total - 50, strategies=only("dedupe"), keep_recent_groups=1).fit(body)
    assert json.loads(fitted.body["messages"][3]["content"]) == json.loads(older)
    out = json.loads(fitted.body["messages"][5]["content"])
    assert out["results"][0] == {"id": 2, "text": "unique"}
    assert "seen earlier" in out["results"][1]


def test_truncation_is_oldest_first_and_spares_the_newest_turns():
    body = agent([words(800, i) for i in range(4)])
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(
        total - 600,
        strategies=only("truncate_tool_results"),
        keep_recent_groups=2,
        low_water_ratio=1.0,
        cut_quantum_ratio=0.05,
    ).fit(body)
    tools = [m["content"] for m in fitted.body["messages"] if m["role"] == "tool"]
    assert "tokens trimmed]" in tools[0]
    assert tools[1] == words(800, 1)  # the cut stopped once enough was saved
    assert tools[3] == words(800, 3)
    assert fitted.report.input_tokens_after <= total - 600 - 100


def test_drop_oldest_turns_keeps_pairs_and_marks_the_gap():
    body = agent([words(200, i) for i in range(6)])
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total - 500, strategies=only("drop_oldest_turns"), keep_recent_groups=2).fit(body)
    msgs = fitted.body["messages"]
    assert msgs[0] == {"role": "system", "content": "sys"}
    marker = next(m for m in msgs if str(m["content"]).startswith("[context-guard:"))
    assert "earlier messages" in marker["content"] and marker["role"] == "user"
    ids = [m.get("tool_call_id") for m in msgs if m["role"] == "tool"]
    calls = [m["tool_calls"][0]["id"] for m in msgs if m.get("tool_calls")]
    assert ids == calls and "c5" in ids
    assert msgs[-1] == {"role": "user", "content": "what now?"}


def test_clamp_output_only_with_a_floor():
    body = agent([words(100)])
    total = engine(100_000).fit(body).report.input_tokens_before
    body["max_tokens"] = 500
    with pytest.raises(ContextWindowExceeded):
        engine(total + 300, strategies=only("clamp_output")).fit(body)
    fitted = engine(total + 300, strategies=only("clamp_output"), min_output_tokens=200).fit(body)
    assert fitted.body["max_tokens"] == 300 and fitted.body["messages"] is body["messages"]
    assert fitted.report.max_tokens_source == "clamped_by_policy"


def test_last_resort_truncates_recent_results_but_not_the_question():
    body = agent([words(3000)], last_user="keep me")
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total // 3).fit(body)
    assert "truncate_recent_tool_results" in kinds(fitted.report)
    assert fitted.body["messages"][-1] == {"role": "user", "content": "keep me"}
    with pytest.raises(ContextWindowExceeded):
        engine(total // 3, strategies=[s for s in STRATEGY_ORDER if s != "truncate_recent_tool_results"]).fit(body)


def _written(page: str) -> dict[str, Any]:
    """What an agent that writes files through a call's arguments sends next: the call (a whole
    page in its arguments) and its result are its newest turn."""
    return {"path": "/out/index.html", "content": page, "overwrite": True}


def _bodies(page: str, answered: bool = True) -> dict[str, tuple[dict[str, Any], str | None]]:
    """The same turn in each dialect (body, dialect): the task, a call writing `page`, its result."""
    args = _written(page)
    chat = {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "make the page"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "w1", "type": "function", "function": {"name": "write_file", "arguments": json.dumps(args)}}
                ],
            },
            *([{"role": "tool", "tool_call_id": "w1", "content": "OK"}] if answered else []),
        ],
    }
    anthropic = {
        "model": "m",
        "max_tokens": 100,
        "system": "sys",
        "messages": [
            {"role": "user", "content": "make the page"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "w1", "name": "write_file", "input": args}]},
            *(
                [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "w1", "content": "OK"}]}]
                if answered
                else []
            ),
        ],
    }
    responses = {
        "model": "m",
        "max_output_tokens": 100,
        "instructions": "sys",
        "input": [
            {"type": "message", "role": "user", "content": "make the page"},
            {"type": "function_call", "call_id": "w1", "name": "write_file", "arguments": json.dumps(args)},
            *([{"type": "function_call_output", "call_id": "w1", "output": "OK"}] if answered else []),
        ],
    }
    return {"chat": (chat, None), "anthropic": (anthropic, "anthropic"), "responses": (responses, "responses")}


def _arguments(body: dict[str, Any]) -> dict[str, Any]:
    for m in body.get("messages") or body.get("input") or []:
        if m.get("tool_calls"):
            return json.loads(m["tool_calls"][0]["function"]["arguments"])
        if m.get("type") == "function_call":
            return json.loads(m["arguments"])
        if isinstance(m.get("content"), list) and m["content"][0].get("type") == "tool_use":
            return m["content"][0]["input"]
    raise AssertionError("no call")


@pytest.mark.parametrize("shape", ["chat", "anthropic", "responses"])
def test_last_resort_shortens_an_answered_calls_arguments_and_keeps_them_json(shape):
    """The newest turn is a call that wrote a whole page and its result (a DeerFlow thread at 30%:
    refused before session 54, the page alone over the room): the last resort cuts the page inside
    the arguments, which stay a JSON object of the same keys, and only as far as the room; the
    task and the result stay; without the step the request is refused as before."""
    body, dialect = _bodies(words(3000))[shape]
    total = engine(100_000).fit(body, dialect=dialect).report.input_tokens_before
    fitted = engine(total // 2).fit(body, dialect=dialect)
    assert kinds(fitted.report)[-1] == "truncate_recent_call_arguments"
    args = _arguments(fitted.body)
    assert set(args) == {"path", "content", "overwrite"} and args["path"] == "/out/index.html"
    assert "[context-guard:" in args["content"] and len(args["content"]) < len(words(3000))
    assert fitted.report.room // 2 < fitted.report.input_tokens_after <= fitted.report.room
    turns = fitted.body.get("messages") or fitted.body["input"]
    assert "make the page" in json.dumps(turns[0 if shape != "chat" else 1])
    assert "OK" in json.dumps(turns[-1])
    without = [s for s in STRATEGY_ORDER if s != "truncate_recent_call_arguments"]
    with pytest.raises(ContextWindowExceeded):
        engine(total // 2, strategies=without).fit(body, dialect=dialect)


@pytest.mark.parametrize("shape", ["chat", "anthropic", "responses"])
def test_a_call_still_waiting_for_its_result_keeps_its_arguments(shape):
    """A call whose result is not in the request has not run: its arguments are not history yet,
    and the request is refused rather than sent with arguments other than the model's own."""
    body, dialect = _bodies(words(3000), answered=False)[shape]
    total = engine(100_000).fit(body, dialect=dialect).report.input_tokens_before
    with pytest.raises(ContextWindowExceeded):
        engine(total // 2).fit(body, dialect=dialect)


def test_last_resort_counts_what_dropping_a_results_other_parts_saves():
    """A newest result of screenshots beside a short text: the last resort keeps its text only, so
    the screenshots go (a line says so), and where that alone brings the request to its mark the
    text stays whole.
    (Counted against the text's own tokens, the text had to lose the whole overflow: it went to the
    floor however far the mark was raised, the request to a tenth of its room.)"""
    shot = {"type": "image", "source": {"type": "url", "url": "https://example.com/shot.png"}}
    text = {"type": "text", "text": words(600)}
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "start"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "look", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t0", "content": [shot, shot, shot, shot, text]}],
            },
            {"role": "assistant", "content": "I see it."},
            {"role": "user", "content": "what now?"},
        ],
    }
    total = engine(100_000).fit(body, dialect="anthropic").report.input_tokens_before
    fitted = engine(total // 2).fit(body, dialect="anthropic")
    assert kinds(fitted.report) == ["truncate_recent_tool_results"]
    kept = fitted.body["messages"][2]["content"][0]["content"]
    assert kept == [{"type": "text", "text": text["text"] + "\n[context-guard: 4 image parts removed]"}]
    assert fitted.report.input_tokens_after <= fitted.report.room
    assert fitted.body["messages"][-1] == {"role": "user", "content": "what now?"}


def test_old_screenshots_go_before_the_steps_around_them():
    """A computer-use loop: each step a call and a result that is a screenshot (some with a line of
    text). Older screenshots are removed, each leaving a line that says so, and every step stays;
    before, with no text to truncate, the results were left alone and the oldest steps dropped."""
    shot = {"type": "image", "source": {"type": "url", "url": "https://example.com/s.png"}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "book a flight"}]
    for i in range(12):
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {i}: " + words(30, i)},
                    {"type": "tool_use", "id": f"t{i}", "name": "computer", "input": {"action": "screenshot"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": [shot]}]},
        ]
    body = {"model": "m", "max_tokens": 100, "messages": [*messages, {"role": "user", "content": "continue"}]}
    total = engine(1_000_000).fit(body, dialect="anthropic").report.input_tokens_before
    fitted = engine(int(total * 0.6)).fit(body, dialect="anthropic")
    assert kinds(fitted.report) == ["truncate_tool_results"]
    sent = fitted.body["messages"]
    assert [m["role"] for m in sent] == [m["role"] for m in body["messages"]]
    results = [m["content"][0]["content"] for m in sent if m["role"] == "user" and isinstance(m["content"], list)]
    gone = [{"type": "text", "text": "[context-guard: 1 image part removed]"}]
    assert results[0] == gone and results[-1] == [shot]
    assert results == sorted(results, key=lambda r: r != gone)  # oldest first


def test_a_result_of_search_results_is_not_truncated_to_nothing():
    """A result made only of Anthropic `search_result` blocks holds its text inside them: the
    truncation of media-only results (screenshots) leaves it alone rather than remove all of it."""
    found = {
        "type": "search_result",
        "source": "https://example.com/a",
        "title": "a",
        "content": [{"type": "text", "text": words(400)}],
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look it up"}]
    for i in range(6):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "search", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": [found]}]},
        ]
    body = {"model": "m", "max_tokens": 100, "messages": [*messages, {"role": "user", "content": "and?"}]}
    total = engine(1_000_000).fit(body, dialect="anthropic").report.input_tokens_before
    fitted = engine(int(total * 0.7)).fit(body, dialect="anthropic")
    assert "truncate_tool_results" not in kinds(fitted.report)
    assert all(
        b["content"] == [found]
        for m in fitted.body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )


def test_a_loop_of_screenshots_each_with_a_word_of_text_is_truncated_not_dropped():
    """Each result a screenshot and a word ("done"): truncating them keeps the words and a line
    each, far under the policy's `truncated_tool_result_tokens`. Taken at that size, the estimate
    of what truncation can reach said it fell short of the mark, and the oldest steps were dropped."""
    shot = {"type": "image", "source": {"type": "url", "url": "https://example.com/s.png"}}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "book a flight"}]
    for i in range(40):
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": "computer", "input": {"x": i}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": [{"type": "text", "text": "done"}, shot]}
                ],
            },
        ]
    body = {"model": "m", "max_tokens": 100, "messages": [*messages, {"role": "user", "content": "continue"}]}
    fitted = engine(12_000).fit(body, dialect="anthropic")
    assert kinds(fitted.report) == ["truncate_tool_results"]
    assert len(fitted.body["messages"]) == len(body["messages"])


def summarized(result_words: int, *strategies: str) -> tuple[Any, list[Any]]:
    """Six tool results of `result_words` words each, fitted 1,500 tokens under their size (the
    newest turn kept) with a summarizer that records what it is asked: (the fit, the requests)."""
    body = agent([words(result_words, i) for i in range(6)])
    total = engine(1_000_000).fit(body).report.input_tokens_before
    asked: list[Any] = []

    def summarize(request):
        asked.append(request)
        return "the agent read six files"

    e = engine(total - 1500, strategies=only(*strategies), keep_recent_groups=1)
    return e.fit(body, summarize=summarize), asked


def test_summary_slot_replaces_a_span_with_a_marked_summary():
    fitted, seen = summarized(400, "summarize")
    assert kinds(fitted.report) == ["summarize"]
    # the summary's output budget: the policy's 1,024 tokens, at most an eighth of a small room
    assert fitted.report.room // 8 < 1024
    assert len(seen) == 1 and seen[0].max_tokens == fitted.report.room // 8
    assert seen[0].messages[0]["role"] == "assistant"  # the span starts at a whole turn group
    summary = next(m for m in fitted.body["messages"] if str(m["content"]).startswith("[context-guard: summary"))
    assert summary["content"].endswith("the agent read six files")


def test_a_summary_in_a_large_room_gets_the_policys_whole_output_budget():
    fitted, seen = summarized(3000, "summarize")
    assert kinds(fitted.report) == ["summarize"]
    assert fitted.report.room // 8 > 1024
    assert [r.max_tokens for r in seen] == [1024]


def test_a_cut_summarizes_exactly_the_messages_it_drops_in_the_place_of_their_marker():
    """Six results of ~530 tokens in a room of ~3.9k: the cut drops whole turns and the summarizer
    is asked once, for exactly the messages the sent request lacks; the summary stands where they
    stood (no drop marker left), and the report moves the drop's tokens onto the summary."""
    fitted, asked = summarized(400, "summarize", "drop_oldest_turns")
    body = agent([words(400, i) for i in range(6)])
    sent = fitted.body["messages"]
    assert fitted.report.fits and len(asked) == 1
    missing = [m for m in body["messages"] if m not in sent]
    assert list(asked[0].messages) == missing
    marks = [i for i, m in enumerate(sent) if str(m.get("content")).startswith("[context-guard:")]
    assert len(marks) == 1 and str(sent[marks[0]]["content"]).startswith("[context-guard: summary")
    assert sent[: marks[0]] == body["messages"][: marks[0]]  # what leads the history stays in front
    assert kinds(fitted.report) == ["summarize"] and fitted.report.summary["span_messages"] == len(missing)


def test_a_summary_of_a_drop_in_runs_stands_in_the_last_runs_place():
    """A cut that keeps an older message between the runs it drops (by relevance) gets one
    summary of every message it drops, in the place of the last run's marker: the kept message
    stays in front of it, so a new cut that drops the same first run sends the same bytes up to
    its summary (the provider's cached prefix reaches past the pinned messages)."""
    from guard.dialects import OPENAI, last_breakpoints
    from guard.fit.conversation import Context, Conversation, Keeping
    from guard.fit.cut_summaries import put_in
    from guard.fit.marks import Marks
    from guard.fit.spans import SummaryRequest
    from guard.fit.strategies import drop

    e = engine(100_000)
    policy = e.policy_for("m")
    counter, _ = e.counter_for("m", policy)
    msgs = [{"role": "user" if i % 2 else "assistant", "content": words(60, i)} for i in range(10)]
    conv = Conversation.build(OPENAI, msgs, counter.messages(OPENAI, msgs), 3, Keeping(0, first_user_turn=False))
    ctx = Context(counter=counter, policy=policy, marks=Marks(stop_at=0))
    cut = drop._without(
        conv, ctx, {2, 3, 5, 6}, last_breakpoints(conv.messages)
    )  # two runs, message 4 kept between them
    ctx.record("drop_oldest_turns", conv.total - cut.total, 4)
    request = SummaryRequest(
        "openai", tuple(msgs[i] for i in (2, 3, 5, 6)), sum(conv.counts[i] for i in (2, 3, 5, 6)), 64
    )
    summarized = put_in(cut, ctx, request, ("llm", "what happened"), 200, [2, 3, 5, 6])
    assert isinstance(summarized, Conversation)
    assert [o for o in summarized.origin if o >= 0] == [0, 1, 4, 7, 8, 9]
    at = next(i for i, o in enumerate(summarized.origin) if o < 0)
    assert summarized.origin[:at] == (0, 1, 4) and summarized.messages[:at] == (msgs[0], msgs[1], msgs[4])
    assert [o for o in summarized.origin if o < 0] == [summarized.origin[at]]  # one message of the guard's: the summary
    assert str(summarized.messages[at]["content"]).startswith("[context-guard: summary")
    assert [a.kind for a in ctx.actions if a.tokens_saved] == ["summarize"]  # (the drop's moved onto it)


def test_a_failing_summarizer_degrades_to_the_deterministic_path():
    body = agent([words(200, i) for i in range(12)])
    total = engine(100_000).fit(body).report.input_tokens_before

    def broken(request):
        raise TimeoutError("summarizer timed out")

    e = engine(total - 1500, keep_recent_groups=1, strategies=only("summarize", "drop_oldest_turns"))
    fitted = e.fit(body, summarize=broken)
    assert fitted.report.fits
    assert [(s.kind, s.reason) for s in fitted.report.skipped] == [("summarize", "no_summary")]
    assert kinds(fitted.report) == ["drop_oldest_turns"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=2, max_size=40), st.data())
def test_the_incremental_drop_total_equals_the_rebuilt_conversation(sizes, data):
    """Giving dropped turns back is computed incrementally (10,000-message requests stay linear);
    every total must equal the one of the conversation rebuilt with its markers."""
    from guard.dialects import OPENAI, last_breakpoints
    from guard.fit.conversation import Context, Conversation, Keeping
    from guard.fit.marks import Marks
    from guard.fit.strategies import drop

    e = engine(100_000)
    policy = e.policy_for("m")
    counter, _ = e.counter_for("m", policy)
    msgs: list[dict[str, Any]] = [
        {"role": "user" if i % 2 else "assistant", "content": words(n, i)} for i, n in enumerate(sizes)
    ]
    for i in data.draw(st.sets(st.integers(0, len(sizes) - 1), max_size=4)):  # prompt-cache breakpoints
        msgs[i]["cache_control"] = {"type": "ephemeral"}  # (a marker of a run that held one carries it)
    conv = Conversation.build(OPENAI, msgs, counter.messages(OPENAI, msgs), 3, Keeping(0, first_user_turn=False))
    ctx = Context(counter=counter, policy=policy, marks=Marks(stop_at=0))
    chosen = set(data.draw(st.sets(st.integers(0, len(sizes) - 1), min_size=1)))
    runs = drop._Runs(conv, ctx, chosen, last_breakpoints(conv.messages))
    assert runs.total == drop._without(conv, ctx, chosen, last_breakpoints(conv.messages)).total
    for i in data.draw(st.permutations(sorted(chosen))):
        total = runs.total_without([i])
        chosen = chosen - {i}
        assert total == drop._without(conv, ctx, chosen, last_breakpoints(conv.messages)).total
        runs.give_back([i], total)


def test_a_big_tool_result_next_to_a_text_block_is_cut_like_any_other():
    """Claude Code appends a text block to tool-result messages: its results are still cut."""
    huge = words(30_000)

    def body(text_block: bool) -> dict[str, Any]:
        results: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": "t1", "content": huge}]
        if text_block:
            results.append({"type": "text", "text": "<system-reminder>keep going</system-reminder>"})
        return {
            "model": "m",
            "max_tokens": 1000,
            "system": "sys",
            "messages": [
                {"role": "user", "content": "read the log"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
                {"role": "user", "content": results},
            ],
        }

    for text_block in (False, True):
        fitted = engine(16_384).fit(body(text_block), dialect="anthropic")
        assert fitted.report.fits and fitted.report.input_tokens_after <= 16_384 - 1000
        assert fitted.body["messages"][0] == {"role": "user", "content": "read the log"}
        if text_block:
            assert fitted.body["messages"][2]["content"][1] == body(True)["messages"][2]["content"][1]


def test_compact_json_rewrites_every_result_once_over():
    pretty = [json.dumps({"rows": [{"k": i, "v": words(20, i)} for i in range(10)]}, indent=2) for _ in range(4)]
    body = agent(pretty)
    total = engine(100_000).fit(body).report.input_tokens_before
    fitted = engine(total - 20, strategies=only("compact_json"), keep_recent_groups=1).fit(body)
    tools = [m["content"] for m in fitted.body["messages"] if m["role"] == "tool"]
    # one result would have been enough; all are compacted, so each has one form turn after turn
    assert all("\n" not in t for t in tools)


def test_truncated_results_take_sizes_from_a_ladder():
    from guard.fit.strategies.truncate import rung

    assert [rung(t, 200) for t in (1, 200, 399, 400, 799, 800, 5000)] == [200, 200, 200, 400, 400, 800, 3200]
    # a result that is a small share of the room: a need that grows within one rung gives the same cut
    body = agent([words(600, 1), words(3000, 2), words(3000, 3), "r1"])
    total = engine(100_000).fit(body).report.input_tokens_before
    cuts = set()
    for need in range(100, 260, 30):
        fitted = engine(
            total - need, strategies=only("truncate_tool_results"), keep_recent_groups=1, cut_quantum_ratio=0.01
        ).fit(body)
        cuts.add(fitted.body["messages"][3]["content"])
    assert len(cuts) == 1


def test_a_result_that_is_most_of_the_room_keeps_what_the_mark_needs_not_the_next_rung():
    """Issue 34: the ladder's next rung down can be half the result: a 5.9k-token result a request
    is 40 tokens over with would keep 3,200 and the cut land at 0.56 of the room, under the 0.6
    room bar. A cut's prefix keeps what its mark needs there (it is made once and carried)."""
    body = agent([words(3000, 1), "r1", "r2", "r3"])
    total = engine(100_000).fit(body).report.input_tokens_before
    for need in range(700, 1300, 100):
        fitted = engine(
            total - need, strategies=only("truncate_tool_results"), keep_recent_groups=1, cut_quantum_ratio=0.01
        ).fit(body)
        report = fitted.report
        assert report.fits and report.input_tokens_after >= 0.6 * report.room, (
            need,
            report.input_tokens_after,
            report.room,
        )


def test_a_duplicate_whose_first_copy_was_dropped_is_sent_again():
    same = words(300)
    body = agent([same, words(400, 1), words(400, 2), words(100, 3), same, "r1", "r2"])
    total = engine(100_000).fit(body).report.input_tokens_before
    # (cut by 300-600 tokens the later copy is restored; since a carried cut's prefix stops at its
    # mark, cut by 650-1400 the first copy's turn stays and another goes)
    for cut, restored in ((500, True), (1500, False)):
        fitted = engine(total - cut, strategies=only("dedupe", "drop_oldest_turns"), keep_recent_groups=2).fit(body)
        tools = {m["tool_call_id"]: m["content"] for m in fitted.body["messages"] if m["role"] == "tool"}
        assert "c0" not in tools and fitted.report.fits  # the first copy went with its turn
        reasons = [s.reason for s in fitted.report.skipped]
        if restored:  # so the later copy is sent whole, not left pointing at nothing
            assert tools["c4"] == same and "first_copy_cut_no_room_to_restore" not in reasons
        else:  # no room for it: the report says so
            assert (
                tools["c4"].startswith("[context-guard: duplicate") and "first_copy_cut_no_room_to_restore" in reasons
            )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(5, 300), st.booleans()), min_size=2, max_size=12),
    st.sampled_from(
        [
            "compact_json",
            "drop_metadata",
            "dedupe",
            "truncate_tool_results",
            "drop_oldest_turns",
            "truncate_recent_tool_results",
        ]
    ),
    st.integers(0, 3000),
)
def test_a_strategy_returns_what_it_did_and_never_writes_to_the_context_it_reads(results, name, stop_at):
    """Each strategy reads its context and returns an Outcome: the caller's ledger and marks stay
    as they were, and the outcome's ledger accounts for exactly the tokens its conversation saved
    (counts are exact here: no estimate)."""
    from guard.dialects import OPENAI
    from guard.fit.conversation import Context, Conversation, Keeping
    from guard.fit.ledger import Ledger
    from guard.fit.marks import Marks
    from guard.fit.strategies import STRATEGIES

    e = engine(100_000)
    policy = e.policy_for("m")
    counter, _ = e.counter_for("m", policy)
    texts = [
        json.dumps(
            {"rows": [{"id": j, "text": words(n, j), "metadata": {"raw": words(n // 2)}} for j in range(3)]}, indent=2
        )
        if as_json
        else words(n, i)
        for i, (n, as_json) in enumerate(results)
    ]
    msgs = agent(texts + texts[:1])["messages"]  # the first result once more: something to dedupe
    conv = Conversation.build(OPENAI, msgs, counter.messages(OPENAI, msgs), 3, Keeping(1))
    marks = Marks(stop_at=stop_at, room=stop_at + 500, target=stop_at, band=100)
    ctx = Context(counter=counter, policy=policy, marks=marks)
    ctx.record("clamp_output", 7, 1)
    before = ctx.ledger.copy()
    out = STRATEGIES[name](conv, ctx)
    assert ctx.marks == marks
    assert ctx.ledger == before
    assert sum(saved for kind, saved, _ in out.ledger.entries if kind == name) == conv.total - out.conv.total
    assert out.conv.total <= conv.total
    ctx.take(out)
    assert ctx.ledger.entries == before.entries + out.ledger.entries
    assert ctx.marks == out.marks and isinstance(ctx.ledger, Ledger)


def _pasted(log: int, answer: int, newest_text: int) -> dict[str, Any]:
    """A user who answers the assistant's question with a pasted log (`log` words), then a step of
    the agent, and its newest step: words (`newest_text`) and a call; each step's result 150 words."""

    def step(i: int, text: str | None) -> list[dict[str, Any]]:
        call = {"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        return [
            {"role": "assistant", "content": text, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": words(150, i)},
        ]

    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "fix the sync"},
            *step(0, None),
            {"role": "assistant", "content": "Done? " + words(answer, 1)},
            {"role": "user", "content": "No, the log:\n" + words(log, 2)},
            *step(1, None),
            *step(2, words(newest_text, 3) if newest_text else None),
        ],
        "max_tokens": 100,
    }


def _counts(body: dict[str, Any]) -> list[int]:
    from guard.core.encodings import get_encoding
    from guard.core.tokens import TokenCounter
    from guard.dialects import OPENAI

    return TokenCounter(get_encoding("o200k_base")).messages(OPENAI, body["messages"])


def _answered_pinned(body: dict[str, Any], room: int, share: float | None = 0.25, upto: int | None = None) -> bool:
    """Whether `Conversation.build` pins the words the pasted log answers (message 4) in `room`."""
    from guard.dialects import OPENAI
    from guard.fit.answered import ANSWERED_HELD
    from guard.fit.conversation import Conversation, Keeping

    msgs = body["messages"][:upto]
    answered = None if share is None else (int(share * room), int(ANSWERED_HELD * room))
    return Conversation.build(OPENAI, msgs, _counts(body)[:upto], 0, Keeping(3, answered=answered)).pinned[4]


def test_a_long_last_user_message_keeps_the_words_it_answers_while_the_agent_works_after_it():
    """The assistant's words a pasted log answers are pinned with it (the log at least
    `keep_answered_share` of the room, the agent's steps after it, the pinned messages with them
    within 0.9 of the room), so a cut drops the agent's steps and not them: the cached prefix holds
    through the log. Not where the log is the newest message, nor under `keep_answered_share: null`."""
    body = _pasted(log=600, answer=40, newest_text=0)
    msgs, counts = body["messages"], _counts(body)
    room = int(counts[5] / 0.6)
    assert _answered_pinned(body, room) and not _answered_pinned(body, room, share=None)
    assert not _answered_pinned(body, room, upto=6)  # (the log is the newest message: kept with its turn anyway)
    assert not _answered_pinned(body, int(counts[5] / 0.88))  # (with the words they would take over 0.9 of the room)
    assert not _answered_pinned(body, counts[5] * 5)  # (a log under a quarter of the room)

    total = engine(1_000_000).fit(body).report.input_tokens_before
    room = total - counts[6] - counts[7] + 10  # (the agent's first step after the log goes)
    assert _answered_pinned(body, room)
    fitted = engine(room + 100, keep_recent_groups=1).fit(body).body["messages"]
    assert msgs[4] in fitted and msgs[5] in fitted and msgs[6] not in fitted
    plain = engine(room + 100, keep_recent_groups=1, keep_answered_share=None).fit(body).body["messages"]
    assert msgs[4] not in plain and msgs[5] in plain


def test_words_too_large_to_pin_beside_a_newest_long_user_message_are_not_kept_as_its_turn():
    """The pasted log is the newest message and, with the words it answers, would take over 0.9 of
    the room: those words are not kept as the newest turn with content, nor is an older turn kept
    in their place, so the first cut drops them (the next one would have, breaking the cache
    before the log). Within 0.9 of the room, or under `keep_answered_share: null`, they are kept."""
    from guard.dialects import OPENAI
    from guard.fit.answered import ANSWERED_HELD
    from guard.fit.conversation import Conversation, Keeping

    body = _pasted(log=600, answer=40, newest_text=0)
    msgs, counts = body["messages"][:6], _counts(body)[:6]

    def recent(room: int, share: float | None = 0.25) -> list[bool]:
        answered = None if share is None else (int(share * room), int(ANSWERED_HELD * room))
        keeping = Keeping(3, recent_room=(room, 0.35, room), answered=answered)
        return list(Conversation.build(OPENAI, msgs, counts, 0, keeping).recent)

    tight = int(sum(counts[i] for i in (0, 1, 4, 5)) / 0.95)  # (the pinned messages with the words: 0.95 of it)
    assert recent(tight) == [False] * 5 + [True]
    assert recent(tight, share=None)[4] and recent(int(sum(counts[i] for i in (0, 1, 4, 5)) / 0.85))[4]


def test_words_a_long_last_user_message_answers_go_where_the_newest_step_needs_their_room():
    """Pinned, the words a pasted log answers would leave the agent's newest step (words no step
    may cut) no room: the request is fitted as without the pin, never refused."""
    body = _pasted(log=600, answer=60, newest_text=120)
    msgs, counts = body["messages"], _counts(body)
    total = engine(1_000_000).fit(body).report.input_tokens_before
    room = total - sum(counts[i] for i in (2, 3, 4, 6, 7)) + 40  # (a marker's room, not the answered words')
    assert _answered_pinned(body, room)
    plain = engine(room + 100, keep_recent_groups=1, keep_answered_share=None).fit(body).body["messages"]
    fitted = engine(room + 100, keep_recent_groups=1).fit(body).body["messages"]
    assert fitted == plain and msgs[4] not in fitted and msgs[-2] in fitted


def test_the_request_that_ends_the_first_user_turn_is_pinned():
    """An agent that sends its instructions as a user message sends the task as the next one
    (TapeAgents' GAIA agent: the steps' schema, then the question; Codex: AGENTS.md and the
    environment, then the prompt): the first user message and the one the model's first reply
    answers are the task, and no cut drops either (session 70's guard dropped the question)."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a research agent."},
        {"role": "user", "content": "You can take these steps: " + "search, read a page, run code. " * 20},
        {
            "role": "user",
            "content": "Question: in the scikit-learn July 2017 changelog, which estimator gained a bug fix?",
        },
    ]
    for k in range(30):
        msgs.append({"role": "assistant", "content": f'{{"kind": "search_action", "query": "changelog {k}"}}'})
        msgs.append({"role": "user", "content": f"search result {k}: " + "a page of results " * 60})
    out = engine(6000).fit({"model": "m", "messages": msgs})
    assert out.report.messages_after < len(msgs)
    assert out.body["messages"][:3] == msgs[:3]


def test_passages_before_the_question_go_as_history_the_question_stays():
    """A client that sends retrieved passages as user messages before its question: the first
    passage and the question are the task; the passages between them go as any history does."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "Answer from the passages."}]
    msgs += [{"role": "user", "content": f"passage {k}: " + words(300, k)} for k in range(12)]
    msgs += [{"role": "user", "content": "Question: which passage names kappa first?"}]
    msgs += [{"role": "assistant", "content": "Passage 0."}, {"role": "user", "content": "And the last one?"}]
    out = engine(3000).fit({"model": "m", "messages": msgs})
    sent = out.body["messages"]
    assert msgs[1] in sent and msgs[13] in sent and msgs[-1] in sent
    assert sum(m in sent for m in msgs[2:13]) < 11
