"""The one memo kind: bounded, the oldest entry forgotten first."""

from __future__ import annotations

import pytest

from guard.core.memo import Memo, bounded_put


def test_a_memo_forgets_its_oldest_entry_first():
    memo: Memo[str, int] = Memo(3)
    for i, key in enumerate("abcd"):
        assert memo.put(key, i) == i
    assert len(memo) == 3 and "a" not in memo and memo.get("d") == 3 and memo.get("a") is None
    memo.put("b", 10)  # a key already held replaces its value, and nothing is evicted
    assert len(memo) == 3 and memo.get("b") == 10 and memo.get("c") == 2


def test_a_memo_holds_at_least_one_entry():
    with pytest.raises(ValueError):
        Memo(0)


def test_bounded_put_evicts_the_same_way():
    store: dict[str, int] = {}
    for i, key in enumerate("abcd"):
        bounded_put(store, key, i, 3)
    assert list(store) == ["b", "c", "d"]
    bounded_put(store, "c", 9, 3)  # a key already held: replaced in place, nothing evicted
    assert store == {"b": 1, "c": 9, "d": 3}


def _rag_body(marker: str) -> dict:
    """A request over a small window whose tool results are pretty JSON (parsed and rewritten)."""
    import json

    doc = {"results": [{"title": f"{marker} doc {i}", "text": f"{marker} " * 200, "score": i} for i in range(6)]}
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"find {marker}"}]
    for i in range(6):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": "{}"}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps(doc, indent=2)})
    messages.append({"role": "user", "content": f"what about {marker}?"})
    return {"model": "m", "messages": messages}


def _engine():
    from guard.core.config import Deployment
    from guard.fit.engine import Engine

    deployments = {"m": Deployment("m", "gpt-4o", {"max_input_tokens": 6000, "max_output_tokens": 1000})}
    return Engine(deployments=deployments, model_map={})


def test_each_engine_owns_the_memos_of_the_pure_helpers():
    """The JSON parses and rewrites, relevance terms and transcript lines a fit memoises are its
    engine's: another engine, and the process-wide set used outside any engine, keep none of
    them, and `memos.clear()` forgets them all."""
    from guard.core.memo import current

    outside = current()
    a, b = _engine(), _engine()
    body = _rag_body("zyxwv")
    texts = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    a.fit(body)
    assert any(t in a.memos.json_parses for t in texts) and len(a.memos.json_rewrites) > 0
    assert len(a.memos.transcript_lines) > 0 or len(a.memos.term_counts) > 0
    assert all(len(memo) == 0 for memo in vars(b.memos).values())  # b never ran
    assert not any(t in outside.json_parses for t in texts)
    assert current() is outside  # put back after the fit
    a.memos.clear()
    assert all(len(memo) == 0 for memo in vars(a.memos).values())


def test_a_plan_holds_its_engines_memos_only_while_it_steps():
    """A shell drives a plan step by step and awaits between steps (a summary call); another
    engine's fit in between uses its own memos, and the plan's steps keep using their engine's."""
    from guard.core.memo import current
    from guard.fit.planner import CachedSummaries

    a, b = _engine(), _engine()
    outside = current()
    p = a.plan(_rag_body("qwert"), can_summarize=True)
    request = next(p)
    assert current() is outside  # between steps: not the plan's engine's
    b.fit(_rag_body("asdfg"))
    assert not any("asdfg" in t for t in a.memos.json_parses._data)
    try:
        while True:
            answer = (None,) * len(request.requests) if isinstance(request, CachedSummaries) else None
            request = p.send(answer)
    except StopIteration as stop:
        assert stop.value.report.fits
    assert any("qwert" in t for t in a.memos.json_parses._data)
    assert not any("qwert" in t for t in b.memos.json_parses._data)
    assert current() is outside
