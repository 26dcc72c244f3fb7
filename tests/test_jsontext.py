from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from guard.core import jsontext
from guard.core.encodings import get_encoding
from tests.strategies import json_value

ENC = get_encoding("o200k_base")


def count(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def test_compact_keeps_the_data():
    pretty = json.dumps({"a": [1, 2.5, None], "b": {"ü": "x y"}}, indent=2)
    out = jsontext.compact(pretty)
    assert json.loads(out) == json.loads(pretty) and len(out) < len(pretty)
    assert jsontext.compact("plain text") == "plain text"
    assert jsontext.compact('"just a string"') == '"just a string"'
    assert jsontext.compact("{not json") == "{not json"


def test_only_strict_json_is_rewritten_and_numbers_stay_exact():
    """Rewrites are written by orjson: what it cannot write exactly goes to `json`, and what is not
    JSON (NaN, Infinity, a number out of a float's range, which orjson would write as null) is text."""
    for text in ('{"a": NaN}', '{"a": [Infinity]}', '{"a": -Infinity}', '{"a": 1e400}'):
        assert jsontext.parse(text) is None and jsontext.compact(text) is text
    big = '{"id": 123456789012345678901234567890, "u": 18446744073709551615, "f": 1.5e-07, "s": "\\ud800 é"}'
    out = jsontext.compact(big)
    assert json.loads(out) == json.loads(big) and "123456789012345678901234567890" in out
    assert jsontext.compact('{"u": 18446744073709551615,  "x": [1, 2]}') == '{"u":18446744073709551615,"x":[1,2]}'


def test_drop_keys_keeps_citations():
    doc = {
        "results": [
            {"title": "T", "text": "body", "embedding": [0.1] * 10, "metadata": {"url": "u", "scores": {"x": 1}}}
        ]
    }
    out = json.loads(jsontext.drop_keys(json.dumps(doc), ["embedding", "metadata"], ["url", "title"]))
    assert out == {"results": [{"title": "T", "text": "body", "metadata": {"url": "u"}}]}
    untouched = json.dumps({"a": 1})
    assert jsontext.drop_keys(untouched, ["metadata"], []) is untouched


@given(json_value.filter(lambda v: isinstance(v, (dict, list))), st.integers(16, 400))
def test_shrink_stays_valid_json_within_budget(value, budget):
    text = json.dumps(value, indent=2)
    counted: list[str] = []
    out = jsontext.shrink(text, budget, lambda t: counted.append(t) or count(t))
    assert count(out) <= budget
    assert out in counted  # cuts judged over by their size alone are never kept: the one kept was encoded
    if count(jsontext.compact(text)) <= budget:
        assert json.loads(out) == value
    elif jsontext.parse(out) is None:
        assert "[context-guard:" in out  # fell back to a marked head/tail cut


def test_shrink_holds_its_budget_when_the_callers_count_is_low():
    """`tokens` is the caller's bound on the text; the cut is held to the budget by real counts."""
    text = json.dumps({"k": "word " * 300})
    out = jsontext.shrink(text, 40, count, tokens=30)
    assert count(out) <= 40


def test_shrink_cuts_array_tails_with_a_marker():
    value = {"items": [{"id": i, "text": "word " * 50} for i in range(200)]}
    out = jsontext.shrink(json.dumps(value), 500, count)
    parsed = json.loads(out)
    assert count(out) <= 500
    assert parsed["items"][0]["id"] == 0
    assert any(isinstance(x, str) and "items trimmed]" in x for x in parsed["items"])


def test_head_tail_keeps_both_ends():
    text = "START " + "middle words here " * 2000 + " END"
    out = jsontext.head_tail(text, 200, count)
    assert out.startswith("START") and out.endswith("END") and "tokens trimmed" in out
    assert count(out) <= 200
