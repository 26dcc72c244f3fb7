"""Property tests of the guard's contract (DESIGN §2 invariants) over generated conversations."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.core import jsontext
from guard.core.config import Deployment
from guard.core.errors import ContextWindowExceeded
from guard.core.policy import Policy, PolicySet
from guard.core.steps import of_kind
from guard.core.tokens import TokenCounter
from guard.dialects import MARKER_PREFIX, by_name, cache_breakpoint, content_texts, group_messages
from guard.fit.engine import Engine
from guard.fit.notes import NOTE_MARK
from guard.fit.planner import CachedSummaries, Fitted, SummaryAnswer, WithheldSummary
from guard.fit.spans import WITHHELD
from guard.fit.strategies.compact import compacted
from guard.fit.strategies.drop import OMITTED_MARK
from tests.strategies import CANARY, _words, long_agent_loop, request_body

# the last resort's steps, the only ones that cut inside the newest turns
LAST_RESORT = of_kind("newest")

UNDERLYING = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "responses": "gpt-4o"}


def _turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A body's list of turns: chat and /v1/messages `messages`, Responses `input`."""
    return body["input"] if "input" in body else body["messages"]


def _engine(settings: dict[str, Any]) -> Engine:
    policy = Policy(
        low_water_ratio=settings["low_water_ratio"],
        keep_recent_groups=settings["keep_recent_groups"],
        min_output_tokens=settings["min_output_tokens"],
        safety_margin_tokens=settings["safety_margin_tokens"],
        safety_margin_ratio=0.0,
        truncated_tool_result_tokens=16,
        summary_max_tokens=64,
        relevance=settings.get("relevance", "bm25"),
        # the invariants below hold the newest keep_recent_groups whole (test_the_share_of_the_newest_turns_...)
        keep_recent_share=settings.get("keep_recent_share"),
        # (`keep_answered_share`, on by default, lets outgrown words of the newest turns go: invariant
        # 3's other exception, tested apart: test_newest_turns_..._but_for_words_a_long_...)
        **({"keep_answered_share": settings["keep_answered_share"]} if "keep_answered_share" in settings else {}),
    )
    info = {"max_input_tokens": settings["window"], "max_output_tokens": settings["max_output"]}
    deployments = {"tiny": Deployment("tiny", UNDERLYING[settings["dialect"]], info)}
    return Engine(PolicySet(defaults=policy), deployments=deployments, model_map={})


def _fit(body: dict[str, Any], settings: dict[str, Any]) -> Fitted | ContextWindowExceeded:
    try:
        return _engine(settings).fit(body, dialect=settings["dialect"])
    except ContextWindowExceeded as e:
        return e


def _fresh_count(engine: Engine, body: dict[str, Any], dialect: str) -> int:
    """An independent count: a new counter with an empty cache."""
    shared, _ = engine.counter_for("tiny", engine.policy_for("tiny"))
    counter = TokenCounter(
        shared.encoding, factor=shared.factor, image_formula=shared.image_formula, tool_framing=shared.tool_framing
    )
    return counter.body(by_name(dialect), body)


@given(request_body())
def test_result_fits_or_is_rejected(case):
    body, settings = case
    engine = _engine(settings)
    try:
        fitted = engine.fit(body, dialect=settings["dialect"])
    except ContextWindowExceeded as e:
        assert e.report.outcome == "rejected"
        assert e.shortfall.requested > e.shortfall.limit  # the numbers prove it does not fit
        return
    report = fitted.report
    key = report.output_key
    counted = _fresh_count(engine, fitted.body, settings["dialect"])
    assert counted == report.input_tokens_after
    reserved = fitted.body[key]
    assert reserved <= settings["max_output"]
    assert counted + reserved + report.safety_margin_tokens <= settings["window"]  # all test models are shared-window


@given(request_body())
def test_a_request_that_fits_is_forwarded_unchanged_but_for_max_tokens(case):
    body, settings = case
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded) or result.report.outcome != "unchanged":
        return
    key = result.report.output_key
    assert {k: v for k, v in result.body.items() if k != key} == {k: v for k, v in body.items() if k != key}
    assert _turns(result.body) is _turns(body)
    assert isinstance(result.body[key], int) and result.body[key] >= 1
    assert result.report.input_tokens_before <= result.report.room


@given(request_body())
def test_system_first_and_last_user_messages_are_verbatim(case):
    body, settings = case
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded):
        return
    out = result.body
    d = by_name(settings["dialect"])
    for key in d.system_keys:
        assert out.get(key) == body.get(key)
    assert [m for m in _turns(out) if d.is_system(m)] == [m for m in _turns(body) if d.is_system(m)]
    turns = _turns(body)
    users = [i for i, m in enumerate(turns) if d.is_user_turn(m)]
    # the task: the first user message, and the request that ends the first user turn where the
    # model's reply follows it (the user messages before the first reply)
    task, end = users[:1], users[0] + 1 if users else 0
    while users and end < len(turns) and d.is_user_turn(turns[end]) and not d.tool_result_ids(turns[end]):
        end += 1
    if users and users[0] < end - 1 and end < len(turns):
        task.append(end - 1)
    for kept in task + users[-1:]:  # the task and the current question
        assert any(m == turns[kept] for m in _turns(out))


def _normal(value: Any) -> Any:
    texts = content_texts(value)
    return [jsontext.compact(t) for t in texts] if texts or isinstance(value, (str, list)) else value


def _newest_groups(
    body: dict[str, Any], settings: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]], list[int], list[int]]:
    """(dialect, messages, each message's group, the newest `keep_recent_groups` groups, newest first)."""
    d = by_name(settings["dialect"])
    msgs = _turns(body)
    groups = group_messages(d, msgs)
    ordinary = [g for g, m in zip(groups, msgs) if not d.is_system(m)]
    return d, msgs, groups, list(dict.fromkeys(reversed(ordinary)))[: settings["keep_recent_groups"]]


@given(request_body())
def test_newest_turns_are_kept_unless_the_last_resort_ran(case):
    body, settings = case
    _newest_turns_kept(body, {**settings, "keep_answered_share": None}, outgrown=False)


@given(request_body())
def test_newest_turns_are_kept_unless_the_last_resort_ran_but_for_words_a_long_newest_message_answers(case):
    """Under the default `keep_answered_share`: the one message of the newest turns that may go
    without the last resort is the assistant's words (no calls) just before a newest user message
    that ends the request, where the pinned messages, those words and that message take over 0.9
    of the room: they go with the first cut (docs/prompt-caches.md). Found at 1,000 examples (session
    65): a 47-token room, a reply of 13 words dropped where the request was refused before it."""
    body, settings = case
    _newest_turns_kept(body, {k: v for k, v in settings.items() if k != "keep_answered_share"}, outgrown=True)


def _newest_turns_kept(body: dict[str, Any], settings: dict[str, Any], outgrown: bool) -> None:
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded):
        return
    if any(a.kind in LAST_RESORT for a in result.report.actions):
        return
    d, msgs, groups, order = _newest_groups(body, settings)
    newest = set(order)
    kept = {m["x_id"]: m for m in _turns(result.body) if "x_id" in m}
    for i, (g, m) in enumerate(zip(groups, msgs)):
        if g not in newest:
            continue
        words = i == len(msgs) - 2 and d.is_user_turn(msgs[-1]) and d.is_reply(m) and not d.tool_call_ids(m)
        if outgrown and words and m["x_id"] not in kept:
            continue
        assert m["x_id"] in kept, "a message of the newest turns was dropped"
        got = kept[m["x_id"]]
        # only JSON whitespace may change in the newest turns
        for (slot, a), (_, b) in zip(d.tool_results(m), d.tool_results(got)):
            assert _normal(a) == _normal(b)
        strip = lambda x: {k: v for k, v in x.items() if k not in ("content", "output")} if d.tool_results(x) else x  # noqa: E731
        if not d.tool_results(m):
            assert got == m
        else:
            assert strip(got) == strip(m) or settings["dialect"] == "anthropic"


def _pairing_ok(dialect: str, messages: list[dict[str, Any]]) -> None:
    d = by_name(dialect)
    for i, m in enumerate(messages):
        calls = d.tool_call_ids(m)
        if not calls:
            continue
        if dialect == "openai":
            results = []
            j = i + 1
            while j < len(messages) and messages[j].get("role") == "tool":
                results += d.tool_result_ids(messages[j])
                j += 1
        elif dialect == "responses":  # each call's output comes later in the list
            results = [r for m2 in messages[i + 1 :] for r in d.tool_result_ids(m2) if r in calls]
        else:
            results = d.tool_result_ids(messages[i + 1]) if i + 1 < len(messages) else []
        assert sorted(results) == sorted(calls), f"call {calls} lost its results {results}"
    for i, m in enumerate(messages):
        for rid in d.tool_result_ids(m):
            prior = [k for k in range(i) if rid in d.tool_call_ids(messages[k])]
            assert prior, f"tool result {rid} has no call before it"
        if m.get("type") == "reasoning":  # a reasoning item stays with the item it preceded, unedited
            assert i + 1 < len(messages) and messages[i + 1].get("x_id") == m["x_id"] + 1, (
                "a reasoning item lost its next item"
            )


@given(request_body())
def test_tool_calls_keep_their_results(case):
    body, settings = case
    _pairing_ok(settings["dialect"], _turns(body))  # the generator makes valid pairs
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded):
        return
    _pairing_ok(settings["dialect"], _turns(result.body))


def _marked(msg: dict[str, Any]) -> bool:
    texts = content_texts(msg.get("content"))
    return bool(texts) and texts[0].startswith(MARKER_PREFIX)


@given(request_body())
def test_order_is_kept_and_insertions_are_marked(case):
    body, settings = case
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded):
        return
    ids = [m["x_id"] for m in _turns(result.body) if "x_id" in m]
    assert ids == sorted(ids)
    for m in _turns(result.body):
        if "x_id" not in m:
            assert _marked(m), "the guard inserted an unmarked message"
    originals = {m["x_id"]: m for m in _turns(body)}
    d = by_name(settings["dialect"])
    for m in _turns(result.body):
        if "x_id" in m and m != originals[m["x_id"]]:
            for (_, before), (_, after) in zip(d.tool_results(originals[m["x_id"]]), d.tool_results(m)):
                if _normal(before) == _normal(after):
                    continue  # only JSON whitespace changed
                # anything else is marked, or is metadata removal (a pruned copy, nothing added)
                marked = any("[context-guard:" in t for t in content_texts(after))
                assert marked or _pruned(content_texts(before), content_texts(after))


def _pruned_value(before: Any, after: Any) -> bool:
    if isinstance(before, dict) and isinstance(after, dict):
        return set(after) <= set(before) and all(_pruned_value(before[k], after[k]) for k in after)
    if isinstance(before, list) and isinstance(after, list):
        return len(before) == len(after) and all(_pruned_value(b, a) for b, a in zip(before, after))
    return before == after


def _pruned(before: list[str], after: list[str]) -> bool:
    if len(before) != len(after):
        return False
    for b, a in zip(before, after):
        bj, aj = jsontext.parse(b), jsontext.parse(a)
        if bj is None or aj is None or not _pruned_value(bj, aj):
            return False
    return True


@given(request_body())
def test_deterministic_and_idempotent(case):
    body, settings = case
    first = _fit(body, settings)
    second = _fit(copy.deepcopy(body), settings)
    if isinstance(first, ContextWindowExceeded):
        assert isinstance(second, ContextWindowExceeded) and str(first) == str(second)
        return
    assert json.dumps(first.body) == json.dumps(second.body)
    again = _fit(first.body, settings)
    assert not isinstance(again, ContextWindowExceeded)
    assert again.report.outcome == "unchanged"
    assert json.dumps(again.body) == json.dumps(first.body)


@given(request_body())
def test_input_tokens_never_grow(case):
    body, settings = case
    result = _fit(body, settings)
    report = result.report
    assert report.input_tokens_after <= report.input_tokens_before
    for action in report.actions:
        assert action.tokens_saved >= 0 and action.items >= 1


@given(request_body())
def test_callers_objects_are_never_mutated(case):
    body, settings = case
    snapshot = copy.deepcopy(body)
    _fit(body, settings)
    assert body == snapshot


@given(request_body())
def test_report_carries_no_message_text(case):
    body, settings = case
    result = _fit(body, settings)
    serialized = json.dumps(result.report.to_dict(), ensure_ascii=False)
    assert CANARY not in serialized
    if isinstance(result, ContextWindowExceeded):
        assert CANARY not in str(result)


# -- with compaction: a deterministic summarizer behind a cache, driven like the callback does --


class _Summaries:
    """A summarizer stand-in: a short summary per span, remembered like the shared cache."""

    def __init__(self) -> None:
        self.cache: dict[str, str] = {}
        self.calls = 0

    def key(self, request: Any) -> str:
        return json.dumps(request.messages, sort_keys=True, default=str)

    def answer(self, request: Any) -> Any:
        if isinstance(request, WithheldSummary):  # (remembered, as the shared cache does)
            self.cache[self.key(request.requests[0])] = WITHHELD
        if isinstance(request, CachedSummaries):
            return tuple(self.cache.get(self.key(r)) for r in request.requests)
        if self.key(request) in self.cache:  # as the real summarizer: the cache first
            return SummaryAnswer(self.cache[self.key(request)], source="cache")
        self.calls += 1
        text = f"{len(request.messages)} messages: task, files and errors {CANARY}"
        self.cache[self.key(request)] = text
        return text


def _fit_compacting(
    body: dict[str, Any], settings: dict[str, Any], summaries: _Summaries
) -> Fitted | ContextWindowExceeded:
    engine = _engine({**settings, "summary": True})
    try:
        p = engine.plan(body, dialect=settings["dialect"], can_summarize=True)
        request = next(p)
        while True:
            request = p.send(summaries.answer(request))
    except StopIteration as stop:
        return stop.value
    except ContextWindowExceeded as e:
        return e


@given(request_body())
def test_with_summaries_pairing_order_and_pinned_messages_hold(case):
    body, settings = case
    result = _fit_compacting(body, settings, _Summaries())
    if isinstance(result, ContextWindowExceeded):
        return
    out = _turns(result.body)
    _pairing_ok(settings["dialect"], out)
    ids = [m["x_id"] for m in out if "x_id" in m]
    assert ids == sorted(ids)
    assert all(_marked(m) for m in out if "x_id" not in m)
    d = by_name(settings["dialect"])
    users = [m for m in _turns(body) if d.is_user_turn(m)]
    for kept in [m for m in _turns(body) if d.is_system(m)] + users[:1] + users[-1:]:
        assert any(m == kept for m in out)
    counted = _fresh_count(_engine(settings), result.body, settings["dialect"])
    assert counted + result.body[result.report.output_key] + result.report.safety_margin_tokens <= settings["window"]


@given(request_body())
def test_with_summaries_from_the_cache_the_fit_is_deterministic_and_idempotent(case):
    body, settings = case
    summaries = _Summaries()
    first = _fit_compacting(body, settings, summaries)
    calls = summaries.calls
    second = _fit_compacting(copy.deepcopy(body), settings, summaries)  # summaries now come from the cache
    assert summaries.calls == calls  # nothing summarized twice
    if isinstance(first, ContextWindowExceeded):
        assert isinstance(second, ContextWindowExceeded)
        return
    assert json.dumps(first.body) == json.dumps(second.body)
    again = _fit_compacting(first.body, settings, summaries)
    assert not isinstance(again, ContextWindowExceeded) and again.report.outcome == "unchanged"
    assert json.dumps(again.body) == json.dumps(first.body)


def test_a_summary_refused_then_found_in_the_cache_leaves_the_fit_as_it_was():
    """The example the property above found on Python 3.10 (its derandomized examples differ by
    version), kept as it was found: a 4,579-token window, the newest turns over the room. The new
    cut's summary of two tiny messages is refused (not shorter) and the cut goes without it; a past
    cut of the history drops the same two messages, and the replay sized it with its summary's room
    while the cache lacked that summary, without it once the cache held it refused: the next fit cut
    elsewhere and asked for a second summary. A refused summary now counts as missing
    (`CutSummaries.carry_size`)."""
    case = json.loads((Path(__file__).parent / "data" / "summary_refused_then_cached.json").read_text())
    body, settings = case["body"], case["settings"]
    summaries = _Summaries()
    first = _fit_compacting(copy.deepcopy(body), settings, summaries)
    calls = summaries.calls
    second = _fit_compacting(copy.deepcopy(body), settings, summaries)
    assert isinstance(first, Fitted) and isinstance(second, Fitted)
    assert summaries.calls == calls and json.dumps(first.body) == json.dumps(second.body)


# -- Anthropic clients put text next to tool results (issue 14, item 6) ------------------------

REMINDER = {"type": "text", "text": "<system-reminder>the user may see your todo list</system-reminder>"}
# The cutting heuristics are not monotonic to the token: marker texts carry token counts (a digit
# more is a token more) and each group is bigger by its reminder, so drops around the band floor
# may pick other groups; the two shapes can end a few tokens apart (at most 3 seen in 10,000
# examples). Relevance ordering is off here (BM25 sees the extra text). The defect this guards
# against (a whole tool-result message pinned) is hundreds of tokens.
SLACK = 48


def _with_reminders(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same conversation as Claude Code sends it: a text block after every tool-result block run."""
    out = []
    for m in messages:
        if (
            m["role"] == "user"
            and isinstance(m["content"], list)
            and any(b.get("type") == "tool_result" for b in m["content"])
        ):
            m = {**m, "content": [*m["content"], dict(REMINDER)]}
        out.append(m)
    return out


def _extra_tokens(engine: Engine, plain: list[dict[str, Any]], mixed: list[dict[str, Any]]) -> int:
    counter, _ = engine.counter_for("tiny", engine.policy_for("tiny"))
    d = by_name("anthropic")
    return sum(counter.message(d, b) - counter.message(d, a) for a, b in zip(plain, mixed))


_NEWEST_CALLS_MUST_GO = (  # drawn by CI (session 50): only dropping the newest calls and results fits
    {
        "model": "tiny",
        "messages": [
            {"role": "user", "content": f"東京 {CANARY}", "x_id": 0},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"call_{i}", "name": "search", "input": {"q": f" {CANARY}"}}
                    for i in range(2)
                ],
                "x_id": 1,
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"call_{i}", "content": "null"} for i in range(2)],
                "x_id": 2,
            },
        ],
    },
    {
        "window": 300,
        "max_output": 129,
        "low_water_ratio": 0.5,
        "keep_recent_groups": 0,
        "min_output_tokens": None,
        "safety_margin_tokens": 64,
        "dialect": "anthropic",
    },
)


@given(request_body())
@example(_NEWEST_CALLS_MUST_GO)
def test_tool_results_with_text_blocks_fit_as_readily_as_without(case):
    body, settings = case
    if settings["dialect"] != "anthropic":
        return
    settings = {**settings, "relevance": "off"}
    mixed_body = {**body, "messages": _with_reminders(_turns(body))}
    extra = _extra_tokens(_engine(settings), _turns(body), _turns(mixed_body))
    # a request that ends in tool results and text ends in the user's words: that turn is among the
    # newest whatever `keep_recent_groups` says (issue 25; the property below). The plain shape is
    # held to the same rule, else with `keep_recent_groups: 0` it may drop the newest calls and
    # results that the mixed shape keeps (drawn: a 300-token window where only that drop fits).
    ends_in_results = bool(by_name("anthropic").tool_results(_turns(body)[-1])) if _turns(body) else False
    kept = max(1, settings["keep_recent_groups"]) if ends_in_results else settings["keep_recent_groups"]
    plain = _fit(body, {**settings, "keep_recent_groups": kept})
    # with room for its extra text, the mixed shape fits whenever the plain one does ...
    roomy = _fit(mixed_body, {**settings, "window": settings["window"] + extra + SLACK})
    if not isinstance(plain, ContextWindowExceeded):
        assert not isinstance(roomy, ContextWindowExceeded), "text next to tool results made a fitting request refused"
    # ... and the plain shape fits whenever the mixed one does in the same window
    same = _fit(mixed_body, settings)
    if not isinstance(same, ContextWindowExceeded):
        assert not isinstance(_fit(body, {**settings, "window": settings["window"] + SLACK}), ContextWindowExceeded)
    for result in (roomy, same):
        if isinstance(result, ContextWindowExceeded):
            continue
        # the user's text blocks are never edited: every kept text block is byte-identical
        originals = {m["x_id"]: m for m in _turns(mixed_body)}
        for m in _turns(result.body):
            if "x_id" not in m or m["role"] != "user" or not isinstance(m["content"], list):
                continue
            before = [b for b in originals[m["x_id"]]["content"] if b.get("type") == "text"]
            assert [b for b in m["content"] if b.get("type") == "text"] == before


@given(request_body())
def test_the_share_of_the_newest_turns_kept_whole_bounds_them_and_never_the_newest(case):
    """With `keep_recent_share` (default 0.5): the newest group with content is kept as invariant 3
    says; an older one of the newest `keep_recent_groups` is cut only where those groups take more
    than the share of what the fixed tokens and pinned messages leave of the room, or reach past
    the bottom of the band below the low-water mark with them. A cut carried from a past request
    of the history (issue 34: `cut_from`) was decided there: the rule holds on that request, and
    what the client added since goes whole."""
    body, settings = case
    settings = {**settings, "keep_recent_share": 0.5}
    engine = _engine(settings)
    try:
        result = engine.fit(body, dialect=settings["dialect"])
    except ContextWindowExceeded:
        return
    if any(a.kind in LAST_RESORT for a in result.report.actions):
        return
    turns, m = _turns(body), result.report.cut_from
    if m is not None and m < len(turns):
        sent = {t["x_id"] for t in _turns(result.body) if "x_id" in t}
        assert all(t["x_id"] in sent for t in turns[m:] if "x_id" in t), "a message added since the cut was cut"
        body = {**body, ("input" if "input" in body else "messages"): turns[:m]}
        try:
            result = _engine(settings).fit(body, dialect=settings["dialect"])
        except ContextWindowExceeded:
            return
        assert result.report.cut_from in (None, m)  # (the past request decided its own cut)
        if any(a.kind in LAST_RESORT for a in result.report.actions):
            return
    d, msgs, groups, newest = _newest_groups(body, settings)
    kept = {m["x_id"] for m in _turns(result.body) if "x_id" in m}
    lost = {g for g, m in zip(groups, msgs) if g in newest and m["x_id"] not in kept}
    if lost:
        shared, _ = engine.counter_for("tiny", engine.policy_for("tiny"))
        counts = shared.messages(d, msgs)
        users = [i for i, m in enumerate(msgs) if d.is_user_turn(m)]
        pinned = {i for i, m in enumerate(msgs) if d.is_system(m) or (users and i in (users[0], users[-1]))}
        room = result.report.room
        held = shared.fixed(d, body) + sum(counts[i] for i in pinned)
        floor = math.floor(room * settings["low_water_ratio"]) - max(1, math.floor(room * Policy().cut_quantum_ratio))
        left = min(0.5 * (room - held), floor - held)
        size = {g: sum(counts[i] for i, h in enumerate(groups) if h == g and i not in pinned) for g in newest}
        kept_whole = [g for g in newest if size[g]][:1]  # the newest group with content always stays
        assert not lost & set(kept_whole)
        assert sum(size.values()) > left, (size, left)


@given(request_body())
def test_the_newest_turns_are_not_cut_while_the_request_fits_without_it(case):
    """Issue 10, item 3: the last resort (cutting inside keep_recent_groups) runs only when nothing
    else can make the request fit; the low-water mark is a target for older history only. One
    exception, issue 34's: a past request of this history that could not fit without it (a result
    larger than the room) was cut by it, and that cut is carried byte for byte while it fits; then
    what the client added since goes whole (a note of what a question asked since is about may go
    among it)."""
    body, settings = case
    engine = _engine(settings)
    policy = engine.policy_for("tiny")
    without = policy.model_copy(update={"strategies": [s for s in policy.strategies if s not in LAST_RESORT]})
    try:
        engine.fit(body, dialect=settings["dialect"], policy=without)
    except ContextWindowExceeded:
        return  # the newest turns had to give: nothing to check
    result = _fit(body, settings)
    assert not isinstance(result, ContextWindowExceeded)
    if not LAST_RESORT & {a.kind for a in result.report.actions}:
        return
    turns, m = _turns(body), result.report.cut_from
    assert m is not None and m < len(turns), "the request's own newest turns were cut"
    past = {**body, ("input" if "input" in body else "messages"): turns[:m]}
    with pytest.raises(ContextWindowExceeded):  # the past request it was made for needed it
        _engine(settings).fit(past, dialect=settings["dialect"], policy=without)
    # (a note of the lines a question asked since is about, `guard.fit.notes`, may go among them:
    # the guard's own message, not the client's)
    dialect = by_name(settings["dialect"])
    sent = [t for t in _turns(result.body) if NOTE_MARK not in json.dumps(t, ensure_ascii=False)]
    assert [compacted(dialect, t) for t in sent[len(sent) - (len(turns) - m) :]] == [
        compacted(dialect, t) for t in turns[m:]
    ]


def _nearly_full_of_newest_turns() -> dict[str, Any]:
    """A body the property above found at 1,000 examples (session 64): a 300-token window whose
    newest turns (a file read and two words of the assistant's) and pinned task leave less than a
    marker's allowance of the 204-token room, but whose older steps, dropped, leave it fitting."""
    content = (
        "東京 and window that yield model test window lambda server async await to yield данные line is path test 東京"
    )
    big = json.dumps({"path": "/out/page.html", "content": f"{content} {CANARY}", "overwrite": False})

    def call(i: int, name: str = "search") -> dict[str, Any]:
        return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": big}}

    def result(i: int, text: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": f"call_{i}", "content": text}

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": _words(1, 0)},
        {"role": "assistant", "content": None, "tool_calls": [call(0), call(1)]},
        result(0, "false"),
        result(1, "null"),
        {"role": "assistant", "content": None, "tool_calls": [call(2)]},
        result(2, "null"),
        {"role": "assistant", "content": None, "tool_calls": [call(3)]},
        result(3, "[]"),
        {"role": "assistant", "content": None, "tool_calls": [call(4, "read_file")]},
        result(4, _words(13, 0)),
        {"role": "assistant", "content": _words(1, 0)},
        {"role": "assistant", "content": _words(1, 0)},
    ]
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    return {"model": "tiny", "messages": [{**m, "x_id": k} for k, m in enumerate(messages)], "tools": tools}


def test_a_drop_that_fits_the_room_leaves_the_newest_turns_as_they_came():
    """Whether a prefix's newest turns leave room for a cut is judged before the cut, with a
    marker's allowance: where they leave less, the last resort was allowed, and the prefix was cut
    inside them down to its mark though dropping older steps alone fitted the room (the newest
    result truncated by a few tokens). The last resort is for a prefix that does not fit the room
    without it; this one keeps its newest turns as they came."""
    settings = {
        "window": 300,
        "max_output": 32,
        "low_water_ratio": 0.5,
        "keep_recent_groups": 3,
        "min_output_tokens": None,
        "safety_margin_tokens": 64,
        "dialect": "openai",
    }
    body = _nearly_full_of_newest_turns()
    result = _fit(body, settings)
    assert not isinstance(result, ContextWindowExceeded)
    report = result.report
    assert report.input_tokens_after <= report.room < report.input_tokens_before
    assert not LAST_RESORT & {a.kind for a in report.actions}
    assert [a.kind for a in report.actions] == ["drop_oldest_turns"]
    sent = [m for m in result.body["messages"] if "x_id" in m]
    assert sent[-4:] == body["messages"][-4:]  # (byte for byte)


def test_the_airline_case_keeps_the_newest_tool_result_whole():
    """A fit with room to spare after the older history is cut leaves the newest result intact."""
    booking = json.dumps(
        {
            "reservation_id": "R1",
            "insurance": "yes",
            "total_baggages": 2,
            "nonfree_baggages": 1,
            "created_at": "2024-05-01",
            "flights": [{"n": i, "from": "SFO", "to": "JFK"} for i in range(30)],
        }
    )
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "airline agent"},
        {"role": "user", "content": "check my booking"},
    ]
    for i in range(12):
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "get", "arguments": "{}"}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": booking.replace("R1", f"R{i}")})
    body = {"model": "tiny", "messages": msgs, "max_tokens": 200}
    for window in (2500, 3000, 4000, 6000):
        settings = {
            "window": window,
            "max_output": 1024,
            "low_water_ratio": 0.9,
            "keep_recent_groups": 1,
            "min_output_tokens": None,
            "safety_margin_tokens": 0,
            "dialect": "openai",
        }
        result = _fit(body, settings)
        assert not isinstance(result, ContextWindowExceeded)
        newest = _turns(result.body)[-1]  # every field of the newest result (compact JSON at most)
        assert newest["tool_call_id"] == "c11" and json.loads(newest["content"]) == json.loads(msgs[-1]["content"]), (
            window
        )


# -- prompt-cache breakpoints survive a cut (issue 10, item 2) -----------------------------------


def _breakpoints(body: dict[str, Any]) -> int:
    n = 0
    system = body.get("system")
    for part in system if isinstance(system, list) else []:
        n += isinstance(part, dict) and "cache_control" in part
    for m in _turns(body):
        n += "cache_control" in m
        for b in m["content"] if isinstance(m.get("content"), list) else []:
            n += isinstance(b, dict) and "cache_control" in b
    return n


@given(request_body(), st.lists(st.integers(0, 60), max_size=3), st.booleans())
def test_cache_breakpoints_move_onto_markers_and_never_multiply(case, marks, system_mark):
    body, settings = case
    if settings["dialect"] != "anthropic":
        return
    body = copy.deepcopy(body)
    for k in marks:  # breakpoints on some blocks of older and newer messages
        m = _turns(body)[k % len(_turns(body))]
        if isinstance(m["content"], str):
            m["content"] = [{"type": "text", "text": m["content"]}]
        if m["content"]:
            m["content"][-1]["cache_control"] = {"type": "ephemeral"}
    if system_mark and isinstance(body.get("system"), str):
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": {"type": "ephemeral"}}]
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded):
        return
    out = result.body
    assert out.get("system") == body.get("system")  # the system prompt's breakpoint untouched
    assert _breakpoints(out) <= _breakpoints(body) <= 4
    kept = {m["x_id"] for m in _turns(out) if "x_id" in m}
    lost = [m for m in _turns(body) if m["x_id"] not in kept and cache_breakpoint(m) is not None]
    if lost:  # a breakpoint on a message that went is on a marker or summary now
        markers = [m for m in _turns(out) if "x_id" not in m]
        assert any(cache_breakpoint(m) is not None for m in markers)


# -- cut points that stay put while a conversation grows (issue 10, item 1) -----------------------


def _growing(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The body as an agent sends it turn by turn: the history before each assistant message
    (before each reasoning item or call, on the Responses API)."""
    msgs = _turns(body)
    key = "input" if "input" in body else "messages"
    starts = ("reasoning", "function_call")
    cuts = [
        i
        for i, m in enumerate(msgs)
        if i > 0
        and (m.get("role") == "assistant" or (m.get("type") in starts and msgs[i - 1].get("type") not in starts))
    ]
    return [{**body, key: msgs[:i]} for i in cuts + [len(msgs)]]


@given(request_body())
def test_a_growing_conversation_keeps_its_prefix_until_the_report_marks_a_new_cut(case):
    """Turn N+1's fitted messages start with turn N's, byte for byte, on every turn whose report
    carries the same cut fingerprint as the turn before; every turn fits or is refused."""
    body, settings = case
    engine = _engine(settings)
    previous: Fitted | None = None
    for turn in _growing(body):
        try:
            fitted = engine.fit(turn, dialect=settings["dialect"])
        except ContextWindowExceeded:
            previous = None
            continue
        assert fitted.report.fits and fitted.report.input_tokens_after <= fitted.report.room
        if previous is not None and fitted.report.cut == previous.report.cut:
            before = _turns(previous.body)
            after = _turns(fitted.body)
            assert json.dumps(after[: len(before)]) == json.dumps(before), (previous.report.cut, fitted.report.cut)
        previous = fitted


@given(request_body())
def test_the_newest_turns_are_sent_as_they_came_while_older_history_can_make_room(case):
    """While the request fits without cutting inside the newest `keep_recent_groups` groups, those
    messages are sent byte-identical (or with their JSON compacted, nothing else)."""
    from guard.fit.strategies.compact import compacted

    body, settings = case
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded) or LAST_RESORT & {a.kind for a in result.report.actions}:
        return
    d = by_name(settings["dialect"])
    groups = group_messages(d, _turns(body))
    ordinary = [g for g, m in zip(groups, _turns(body)) if not d.is_system(m)]
    newest = set(list(dict.fromkeys(reversed(ordinary)))[: settings["keep_recent_groups"]])
    recent = [m for g, m in zip(groups, _turns(body)) if g in newest]
    sent = {m["x_id"]: m for m in _turns(result.body) if "x_id" in m}
    for m in recent:
        assert m["x_id"] in sent
        assert sent[m["x_id"]] in (m, compacted(d, m))


@given(request_body())
def test_the_guards_count_of_a_body_is_what_its_fit_reports(case):
    """`Engine.count` (the proxy's token-counting endpoints) answers what the fit counts."""
    body, settings = case
    result = _fit(body, settings)
    assert _engine(settings).count(body, dialect=settings["dialect"]) == result.report.input_tokens_before


def sized(body: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` with the window of a `long_agent_loop` set: its `share` of the whole loop."""
    probe = Engine(
        PolicySet(defaults=Policy()),
        deployments={"tiny": Deployment("tiny", UNDERLYING[settings["dialect"]], {"max_input_tokens": 10**7})},
        model_map={},
    )
    full = probe.fit(body, dialect=settings["dialect"]).report.input_tokens_before
    settings["window"] = int(full * settings["share"]) + settings["max_output"]
    return settings


@given(long_agent_loop())
def test_a_long_loop_whose_turns_must_go_keeps_its_cut_between_crossings(case):
    """Issue 24: a loop that grows to 2-5x its room (20-40 turns: each example replays every turn),
    with results too many for truncation alone, so
    whole turns go on most turns. Turn N+1's fitted messages start with turn N's, byte for byte,
    except on turns whose report marks a new cut; and new cuts come once per band of growth (the
    quantum, `cut_quantum_ratio` of the room), plus one, not once per turn."""
    _keeps_its_cut_between_crossings(*case)


@given(long_agent_loop(dialects=("openai", "responses"), environment=True))
@settings(max_examples=max(100, settings.default.max_examples // 2))
def test_a_loop_that_follows_its_results_with_its_own_message_keeps_its_cut_between_crossings(case):
    """The same for a client that follows each batch of results with a message of its own in the
    same request (Roo Code's environment details): and every new cut is made on a request the
    client sent, not on the history up to the results alone, which no request held."""
    _keeps_its_cut_between_crossings(*case)


def _keeps_its_cut_between_crossings(body: dict[str, Any], settings: dict[str, Any]) -> None:
    """Replays `body` turn by turn (`_growing`) and checks the carried cuts (see above)."""
    engine = _engine(sized(body, settings))
    previous: Fitted | None = None
    new_cuts = cut_turns = 0
    last_before = room = band = 0
    trail = []
    sent = set()
    for turn in _growing(body):
        sent.add(len(_turns(turn)))
        fitted = engine.fit(turn, dialect=settings["dialect"])  # the newest turns are small: never refused
        report = fitted.report
        assert report.fits and report.input_tokens_after <= report.room
        trail.append((report.input_tokens_before, report.cut_from, report.cut and report.cut[:4]))
        if report.cut is not None:
            cut_turns += 1
            new_cuts += previous is None or report.cut != previous.report.cut
            last_before, room = report.input_tokens_before, report.room
            band = max(1, int(room * Policy().cut_quantum_ratio))
            assert report.cut_from is None or report.cut_from in sent, (report.cut_from, sorted(sent))
        if previous is not None and report.cut == previous.report.cut:
            before, after = _turns(previous.body), _turns(fitted.body)
            assert json.dumps(after[: len(before)]) == json.dumps(before), report.cut
        previous = fitted
    assert cut_turns >= 5
    assert new_cuts <= (last_before - room) // band + 2, (new_cuts, cut_turns, last_before, room, band, trail)


def _stubbed(body: dict[str, Any], stub: str, recent: int) -> dict[str, Any]:
    """The least a fit can send of `body`: what it pins (its system prompt, the first and the last
    message a person typed: on /v1/messages a tool-result message with text next to its results
    is not one), the newest `recent` turn groups (at least the one holding the last message: the
    policy keeps them) with every tool result replaced by `stub` (text blocks as they are), and
    one marker for each run of messages left out."""
    d = by_name("anthropic")
    msgs = _turns(body)
    groups = group_messages(d, msgs)
    newest = set(list(dict.fromkeys(reversed(groups)))[: max(1, recent)])
    users = [i for i, m in enumerate(msgs) if d.is_user_turn(m)]
    pinned = {users[0], users[-1]} if users else set()

    def stubbed(m: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(m["content"], list):
            return m
        return {**m, "content": [{**b, "content": stub} if b.get("type") == "tool_result" else b for b in m["content"]]}

    out: list[dict[str, Any]] = []
    for i, (m, g) in enumerate(zip(msgs, groups)):
        if g in newest:
            out.append(stubbed(m))
        elif i in pinned:
            out.append(m)
        elif i == 0 or groups[i - 1] in newest or i - 1 in pinned:  # a run left out starts here
            out.append(d.marker(OMITTED_MARK.format(m=len(msgs), n=10**6), None))
    return {**body, "messages": out}


@settings(max_examples=max(1000, settings.default.max_examples))  # the 1,000, even in CI's share
@given(request_body(dialects=("anthropic",)), st.text(alphabet="abcdefgh ", min_size=1, max_size=200))
def test_a_last_message_of_tool_results_and_text_is_cut_before_it_is_refused(case, said):
    """Issue 25, item 2: Claude Code sends the newest tool results and the user's words in one user
    message. When that message alone overflows, its results are cut down to the room (its text
    blocks verbatim); a refusal only when the system prompt, the task, the turns the policy keeps
    (`keep_recent_groups`, the last at least) with their results cut to stubs, and the output do
    not fit."""
    body, settings = case
    msgs = _turns(body)
    if not msgs or msgs[-1]["role"] != "user" or not isinstance(msgs[-1]["content"], list):
        return
    if not any(b.get("type") == "tool_result" for b in msgs[-1]["content"]):
        return
    text = {"type": "text", "text": said + " " + CANARY}
    body = {**body, "messages": [*msgs[:-1], {**msgs[-1], "content": [*msgs[-1]["content"], text]}]}
    engine = _engine(settings)
    result = _fit(body, settings)
    if isinstance(result, ContextWindowExceeded):
        # the least that could be sent: each result a stub as long as the truncation floor plus its marker
        least = _stubbed(body, " ".join(["word"] * (16 + 24)), settings["keep_recent_groups"])
        counter, _ = engine.counter_for("tiny", engine.policy_for("tiny"))
        need = counter.body(by_name("anthropic"), least)
        report = result.report
        assert (
            need + report.max_tokens + report.safety_margin_tokens > report.context_window
            or report.max_input_tokens < need
        ), (need, report.room)
        return
    sent = _turns(result.body)[-1]
    assert isinstance(sent["content"], list), (sent, result.report.actions)
    assert [b for b in sent["content"] if b.get("type") == "text"] == [
        b for b in body["messages"][-1]["content"] if b.get("type") == "text"
    ]
