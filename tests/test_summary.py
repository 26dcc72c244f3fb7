"""The pure side of compaction: transcripts, map-reduce chunks, cache keys, answer checks."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from guard.core.encodings import get_encoding
from guard.dialects import ANTHROPIC, OPENAI
from guard.fit import summary

ENC = get_encoding("o200k_base")


def raw(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def test_openai_transcript_flattens_tool_calls_and_results():
    msgs = [
        {"role": "user", "content": "fix the import in src/app.py"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"src/app.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "import foo_utils"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "x"}}],
        },
    ]
    lines = summary.transcript(OPENAI, msgs)
    assert lines[0] == "[user] fix the import in src/app.py"
    assert "read_file" in lines[1] and "src/app.py" in lines[1]
    assert lines[2] == "[tool result c1] import foo_utils"
    assert lines[3] == "[user] see\n[image]"


def test_resent_messages_get_the_same_line_and_differing_ones_do_not():
    msgs = [{"role": "tool", "tool_call_id": "c1", "content": "ok " * 50}, {"role": "user", "content": "ok " * 50}]
    again = [dict(m, content="".join(["ok "] * 50)) for m in msgs]  # equal, not the same objects
    first, second = summary.transcript(OPENAI, msgs), summary.transcript(OPENAI, again)
    assert first == second and all(a is b for a, b in zip(first, second))
    other = summary.transcript(OPENAI, [dict(msgs[0], tool_call_id="c2"), dict(msgs[1], role="assistant")])
    assert other[0].startswith("[tool result c2]") and other[1].startswith("[assistant]")
    assert summary.transcript(ANTHROPIC, msgs[1:])[0] == first[1]  # same rendering, own memo entry
    assert summary.transcript(OPENAI, [{"role": "user", "name": ["odd"], "content": "x"}]) == ["[user] x"]


def test_anthropic_transcript_flattens_blocks():
    msgs = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "ERR-42"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ERR-42 at line 7"}]}
            ],
        },
    ]
    lines = summary.transcript(ANTHROPIC, msgs)
    assert lines[0] == '[assistant] reading\n(calls tool grep with {"pattern":"ERR-42"})'
    assert lines[1] == "[user] [tool result t1] ERR-42 at line 7"


def test_chunks_pack_lines_in_order_within_the_room():
    lines = [f"line {i} " + "word " * 50 for i in range(20)]
    counts = [raw(x) + 4 for x in lines]
    parts = summary.chunks(lines, counts, 200, raw)
    assert [x for p in parts for x in p] == lines  # nothing lost, order kept
    for p in parts:
        assert sum(counts[lines.index(x)] for x in p) <= 200
    assert len(parts) > 1


def test_a_line_larger_than_the_room_is_shortened_head_and_tail():
    big = "start " + "filler " * 2000 + "end"
    parts = summary.chunks(["small", big], [3, raw(big)], 300, raw)
    shortened = parts[-1][0]
    assert shortened.startswith("start") and shortened.endswith("end")
    assert raw(shortened) <= 300


def test_cache_keys_separate_tenants_models_and_budgets():
    base = summary.span_key("team:a", "m", 512, ["text"])
    assert base == summary.span_key("team:a", "m", 512, ["text"])
    assert base != summary.span_key("team:b", "m", 512, ["text"])
    assert base != summary.span_key("team:a", "other", 512, ["text"])
    assert base != summary.span_key("team:a", "m", 256, ["text"])
    assert base != summary.span_key("team:a", "m", 512, ["text!"])
    assert base != summary.span_key("team:a", "m", 512, ["te", "xt"])
    assert summary.span_key("t", "m", 1, ["a", "b"]) != summary.span_key("t", "m", 1, ["b", "a"])
    assert "text" not in base.split(":")[-1]


@given(st.lists(st.lists(st.text(max_size=5), max_size=6), max_size=5), st.booleans())
def test_nested_span_keys_equal_the_keys_of_each_span_alone(spans, nest):
    """span_keys hashes nested spans incrementally; each key must equal the span's own key and the
    published definition (sha256 of the parts and of the span's digest, NUL-separated; the digest
    sha256 over each line's sha256), so a summary is found by its span's digest alone."""
    if nest:  # each span extends the one before, as a plan's spans do
        spans = [sum(spans[: i + 1], []) for i in range(len(spans))]
    keys = summary.span_keys("t", "m", 64, spans)
    assert keys == [summary.span_key("t", "m", 64, s) for s in spans]
    for key, lines in zip(keys, spans):
        span = hashlib.sha256()
        for line in lines:
            span.update(hashlib.sha256(line.encode("utf-8", "surrogatepass")).digest())
        assert summary.span_digest(lines) == span.hexdigest()
        digest = hashlib.sha256()
        for part in (summary.PROMPT_VERSION, "t", "m", "64", span.hexdigest()):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
        assert key == "context-guard:summary:" + digest.hexdigest()
        assert key == summary.summary_key("t", "m", 64, summary.span_digest(lines))


def test_answers_that_cannot_be_used():
    assert summary.check("  ", 0, 100).reason == "summary_empty"
    assert summary.check(None, 0, 100).reason == "summary_empty"
    assert summary.check("x", 101, 100).reason == "summary_oversized"
    assert summary.check("x", 100, 100).ok


def test_the_prompt_asks_for_what_agents_need():
    prompt = summary.system_prompt(1000).lower()
    for need in ("task", "decisions", "file paths", "identifiers", "numbers", "error", "open items"):
        assert need in prompt
    assert str(summary.words_for(1000)) in prompt


def test_the_transcript_memos_are_bounded_by_characters():
    from guard.core.memo import Memo, current

    assert current().transcript_lines.sized and current().line_digests.sized
    memo: Memo[object, str] = Memo(6400, sized=True)
    for i in range(300):
        memo.put(i, "x", 30)
    assert memo.size <= 6400 and len(memo) == 6400 // 30 and memo.get(299) == "x" and memo.get(0) is None
    memo.put("huge", "y", 500)  # more than 1/64 of the budget: not kept
    assert memo.get("huge") is None and memo.size <= 6400
