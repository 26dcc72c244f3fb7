"""Engine speed against LiteLLM's own token counter, measured in the same run.

    .venv/bin/python -m bench.engine_bench [--repeat 7] [--real] [--counting-threads 1]

Prints best-of-N times and the ratios set as bars (the engine issue's, tightened by issue 26):
- cold count of a ~400-message / ~120k-token agent conversation <= 0.7x `litellm.token_counter`
  (while counting more of what is sent: tool names, framing, schemas as sent);
- warm re-check after one new message <= 1 ms and >= 20x faster than `litellm.token_counter`;
- a full fit of a ~300k-token overflow into a 128k window <= 150 ms, and <= 1.5x the time
  `litellm.token_counter` alone takes to count that request;
- the same of a ~300k-token body of real agent turns (bench.cache's chat loops one after another
  after one task, their calls renamed apart: issue 36's "large body of real agent turns with fresh
  text"), <= 1.5x `token_counter` (`--real`; reported, not a bar of this bench's verdict).
Each request is a fresh JSON parse, as in the proxy, so caching by object identity cannot help.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from typing import Any, Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.traces import agent_trace  # noqa: E402
from guard.core.encodings import get_encoding  # noqa: E402
from guard.core.policy import load_policy_set  # noqa: E402
from guard.core.tokens import TokenCounter, set_counting_threads  # noqa: E402
from guard.dialects import OPENAI  # noqa: E402
from guard.fit.engine import Engine  # noqa: E402


def fresh(body: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(body))


def best_time(fn: Callable[[Any], Any], setup: Callable[[], Any], repeat: int) -> float:
    """Best wall time of fn(setup()) over `repeat` runs, garbage collection off while timing; the
    minimum is what timeit reports too: noise on a shared machine only ever adds time."""
    times = []
    for _ in range(repeat):
        arg = setup()
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn(arg)
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--relevance", choices=["bm25", "off"], default="bm25", help="the policy's relevance setting for the full fit"
    )
    parser.add_argument("--real", action="store_true", help="also fit a ~300k-token body of real agent turns")
    parser.add_argument(
        "--counting-threads", type=int, choices=[1, 2], default=2, help="`context_guard.worker.counting_threads`"
    )
    args = parser.parse_args(argv)
    import litellm

    enc = get_encoding("o200k_base")
    set_counting_threads(args.counting_threads)
    TokenCounter(enc).prepare_threads()  # (a twin for two, as a proxy worker builds at start-up)
    body = agent_trace()
    msgs, tools = body["messages"], body["tools"]
    litellm.token_counter(model="gpt-4o", messages=msgs[:2])  # load LiteLLM's tokenizer once
    ours = TokenCounter(enc).body(OPENAI, body)
    theirs = litellm.token_counter(model="gpt-4o", messages=msgs, tools=tools)
    print(
        f"trace: {len(msgs)} messages, {len(json.dumps(body)):,} chars; guard counts {ours:,} tokens, token_counter {theirs:,}"
    )

    t_lite = best_time(
        lambda b: litellm.token_counter(model="gpt-4o", messages=b["messages"], tools=b["tools"]),
        lambda: fresh(body),
        args.repeat,
    )
    t_cold = best_time(lambda b: TokenCounter(enc).body(OPENAI, b), lambda: fresh(body), args.repeat)
    print(
        f"cold count: guard {t_cold * 1e3:.1f} ms, litellm.token_counter {t_lite * 1e3:.1f} ms, ratio {t_cold / t_lite:.2f}x (bar <= 0.7x)"
    )

    warm = TokenCounter(enc)
    warm.body(OPENAI, body)
    grown = dict(
        body, messages=msgs + [{"role": "user", "content": "One more thing: also check the imports in setup.py."}]
    )
    t_warm = best_time(lambda b: warm.body(OPENAI, b), lambda: fresh(grown), args.repeat)
    t_lite_grown = best_time(
        lambda b: litellm.token_counter(model="gpt-4o", messages=b["messages"], tools=b["tools"]),
        lambda: fresh(grown),
        args.repeat,
    )
    print(
        f"warm re-check (+1 message): guard {t_warm * 1e3:.3f} ms, token_counter {t_lite_grown * 1e3:.1f} ms, speed-up {t_lite_grown / t_warm:.0f}x (bars <= 1 ms, >= 20x)"
    )

    big = agent_trace(turns=360, seed=3)
    policies = load_policy_set({"defaults": {"relevance": args.relevance}})
    engine = Engine()
    engine.counter_for("gpt-4o", engine.policy_for("gpt-4o"))  # encoding loaded; counts are cold
    size = TokenCounter(enc).body(OPENAI, big)

    t_fit, t_big, report = full_fit(big, policies, args.repeat)
    print(
        f"full fit: {size:,} tokens into gpt-4o's 128k window (room {report.room:,}) -> {report.input_tokens_after:,} "
        f"in {t_fit * 1e3:.0f} ms, cold caches, relevance {args.relevance} (bars <= 150 ms, <= 1.5x token_counter "
        f"alone: {t_big * 1e3:.0f} ms, {t_fit / t_big:.2f}x); actions: {actions(report)}"
    )
    if args.real:
        real = real_turns()
        t_real, t_real_lite, done = full_fit(real, policies, args.repeat)
        print(
            f"full fit, real agent turns: {len(real['messages'])} messages, {done.input_tokens_before:,} tokens -> "
            f"{done.input_tokens_after:,} in {t_real * 1e3:.0f} ms (token_counter {t_real_lite * 1e3:.0f} ms, "
            f"{t_real / t_real_lite:.2f}x; bar <= 1.5x); actions: {actions(done)}"
        )
    ok = (
        t_cold / t_lite <= 0.7
        and t_warm <= 1e-3
        and t_lite_grown / t_warm >= 20
        and t_fit <= 0.150
        and t_fit <= 1.5 * t_big
    )
    print("all bars met" if ok else "SOME BARS MISSED")
    return 0


def full_fit(body: dict[str, Any], policies: Any, repeat: int) -> tuple[float, float, Any]:
    """The best time of a cold full fit of `body` over `repeat` runs, that of `litellm.token_counter`
    on the same body, and the fit's report. Every memo the engine keeps across requests starts
    empty: counts, parses, rewrites, terms, dedupe keys, transcript lines (a new engine each run:
    new counters, new memos)."""
    import litellm

    t_fit = best_time(lambda b: Engine(policies).fit(b), lambda: fresh(body), repeat)
    t_lite = best_time(
        lambda b: litellm.token_counter(model="gpt-4o", messages=b["messages"], tools=b.get("tools")),
        lambda: fresh(body),
        repeat,
    )
    return t_fit, t_lite, Engine(policies).fit(body).report


def actions(report: Any) -> str:
    """What a fit did, step by step, in tokens saved."""
    return ", ".join(f"{a.kind} -{a.tokens_saved:,}" for a in report.actions)


def real_turns(tokens: int = 300_000) -> dict[str, Any]:
    """A gpt-4o chat body of about `tokens` tokens: one task, then the turns of bench.cache's real
    chat loops one after another (their calls renamed apart, system prompts left out), ending on a
    request (not on a reply of the model's)."""
    from bench.heavy_fits import chat_runs, renamed_turns

    counter = TokenCounter(get_encoding("o200k_base"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Work through these tasks, one after another."},
    ]
    total = 0
    for k, body in enumerate(chat_runs()):
        turns = renamed_turns(body, k)
        messages += turns
        total += sum(counter.messages(OPENAI, turns))
        if total >= tokens:
            break
    while messages[-1].get("role") == "assistant":
        messages.pop()
    return {"model": "gpt-4o", "messages": messages, "max_tokens": 1024}


if __name__ == "__main__":
    sys.exit(main())
