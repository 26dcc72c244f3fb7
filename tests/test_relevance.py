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
