"""Relevance-aware cutting: what the last user message asks about is cut last."""

from __future__ import annotations

import json

from bench import needle
from guard import relevance
from guard.config import Deployment
from guard.engine import Engine
from guard.policy import load_policy_set


def test_bm25_ranks_the_document_the_question_is_about():
    docs = ["pytest output: 40 passed", "the rollback key for the helix deployment is Q123-4567", "def main(): pass"]
    scores = relevance.scores("what is the rollback key for helix?", docs)
    assert scores.index(max(scores)) == 1
    assert relevance.relevant(scores) == {1}


def test_no_overlap_means_nothing_is_relevant():
    assert relevance.relevant(relevance.scores("zebra", ["apple pie", "banana"])) == set()
    assert relevance.scores("", ["x"]) == [0.0]


def _fitted(body, mode: str, window: int) -> str:
    engine = Engine(
        load_policy_set({"defaults": {"relevance": mode, "safety_margin_tokens": 1024, "safety_margin_ratio": 0.0}}),
        deployments={"half": Deployment("half", "gpt-4o", {"max_input_tokens": window, "max_output_tokens": 4096})},
        model_map=None,
    )
    fitted = engine.fit(json.loads(json.dumps(body)), model="half")
    return json.dumps(fitted.body["messages"][:-1], ensure_ascii=False)


def test_a_planted_fact_survives_with_relevance_where_oldest_first_loses_it():
    wins = 0
    for seed in range(6):
        body, value = needle.case(seed)
        size = Engine(model_map=None).fit(body, model="gpt-4o").report.input_tokens_before
        window = size // 4 + 4096 + 1024
        with_relevance = value in _fitted(body, "bm25", window)
        oldest_first = value in _fitted(body, "off", window)
        assert with_relevance or not oldest_first  # relevance never loses a fact oldest-first keeps
        wins += with_relevance and not oldest_first
    assert wins >= 2


def test_a_new_turn_does_not_reorder_the_cut_of_the_older_history():
    """Relevance is scored among the history in whole bands: a new result that matches the
    question far better than the older ones (its score would raise the bar of what counts as
    relevant) changes nothing in how the older history is cut until the history grows by a band,
    so the previous turn's fitted prompt is still a prefix (the provider's cache holds)."""
    from tests.test_strategies import agent, engine, words

    weak = [words(150, i) + (" rollback notes" if i % 2 else "") for i in range(12)]
    body = agent(weak, last_user="which rollback key for the orion deployment?")
    strong = "rollback key orion deployment: the orion rollback key is K-42 " * 3
    turn = json.loads(json.dumps(body))
    turn["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "n1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "n1", "content": strong},
    ]
    total = engine(100_000).fit(body).report.input_tokens_before
    guard = engine(total * 4 // 5, strategies=["truncate_tool_results"], keep_recent_groups=1)
    first, second = guard.fit(body), guard.fit(turn)
    assert first.report.actions and second.report.actions
    before, after = first.body["messages"], second.body["messages"]
    assert after[: len(before)] == before
    assert second.report.cut == first.report.cut


def test_relevance_still_orders_the_cut_when_the_tools_make_the_overflow():
    """The banded corpus is measured in the messages' own tokens; when the tool schemas (counted
    outside the messages) are what pushes a request over its room, the messages all stay scored."""
    from guard.conversation import Context
    from guard.policy import Policy

    def settled_end(counts: tuple[int, ...]) -> int:
        ctx = Context(counter=None, policy=Policy(), stop_at=0, target=1000, band=350)  # type: ignore[arg-type]
        ctx.original_counts = counts
        return ctx._settled_end()

    assert settled_end((100, 200, 300)) == 2  # below the mark: every message is scored
    assert settled_end((600, 500, 300)) == 1  # 1,400 tokens: scored up to 1,000 + one band
    assert settled_end((600, 500, 300, 40)) == 1  # a new message within the band changes nothing
    assert settled_end((600, 500, 300, 400)) == 2  # one past the next band (1,700) moves it
