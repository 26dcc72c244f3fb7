"""Fuzz the engine with malformed and extreme request bodies.

    .venv/bin/python -m bench.fuzz --bodies 100000 [--seed 0]

Bodies are valid agent conversations (both dialects) mutated at random: wrong types and missing
fields, unknown roles, content as numbers/objects, broken tool calls, invalid and deeply nested
JSON in tool results, huge and empty texts, lone surrogates and control characters, orphan tool
results, and a few 10,000-message bodies. Every body must end in one of three ways:
- a fit that really fits (input recounted from scratch + output + margin <= window),
- a rejection (ContextWindowExceeded: a 400 with the numbers),
- a clear bad-request error (GuardError: a 400 naming the field),
never any other exception. Prints the counts, the slowest body, and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import time
import traceback
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from guard.config import Deployment  # noqa: E402
from guard.dialects import by_name  # noqa: E402
from guard.engine import Engine  # noqa: E402
from guard.errors import ContextWindowExceeded, GuardError  # noqa: E402
from guard.policy import load_policy_set  # noqa: E402
from guard.tokens import TokenCounter  # noqa: E402

WORDS = "the error in src/app.py line 42 failed import retry token window über 東京 данные ✓ {} [] \" \\".split()
ROLES = ["system", "user", "assistant", "tool", "developer", "function", "critic", "", None, 7]


def text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.08:
        return "x" * rng.randint(20_000, 200_000)  # one long run without spaces
    if kind < 0.10:
        return "\ud800 lone surrogate \x00 nul \x1b esc"
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60)))


def json_text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.2:
        return "{" * rng.randint(1, 5000)  # invalid, deeply nested opening
    if kind < 0.3:
        depth = rng.randint(100, 3000)
        return "[" * depth + "1" + "]" * depth  # valid, deeply nested
    if kind < 0.5:
        return '{"results": [' + ",".join('{"id": %d, "metadata": {"embedding": [0.1, 0.2]}, "text": "%s"}' % (i, text(rng)[:200]) for i in range(rng.randint(0, 80))) + "]}"
    return '{"a": ' + text(rng)[:50]  # truncated JSON


def conversation(rng: random.Random) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": text(rng)}, {"role": "user", "content": text(rng)}]
    for t in range(rng.randint(0, 30)):
        cid = f"c{t}"
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": json_text(rng) if rng.random() < 0.5 else text(rng)})
    msgs.append({"role": "user", "content": text(rng)})
    return msgs


def anthropic(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    out = []
    for m in msgs[1:]:
        if m.get("tool_calls"):
            out.append({"role": "assistant", "content": [{"type": "tool_use", "id": c["id"], "name": "f", "input": {}} for c in m["tool_calls"]]})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return {"model": "fuzz", "system": msgs[0]["content"], "messages": out, "max_tokens": 512}


MUTATIONS = []


def mutation(fn):  # noqa: ANN001
    MUTATIONS.append(fn)
    return fn


@mutation
def wrong_role(rng, body):  # noqa: ANN001
    m = rng.choice(body["messages"]) if isinstance(body["messages"], list) and body["messages"] else None
    if isinstance(m, dict):
        m["role"] = rng.choice(ROLES)


@mutation
def drop_field(rng, body):  # noqa: ANN001
    m = rng.choice(body["messages"]) if isinstance(body["messages"], list) and body["messages"] else None
    if isinstance(m, dict) and m:
        m.pop(rng.choice(list(m)), None)


@mutation
def wrong_content_type(rng, body):  # noqa: ANN001
    m = rng.choice(body["messages"]) if isinstance(body["messages"], list) and body["messages"] else None
    if isinstance(m, dict):
        m["content"] = rng.choice([7, 3.5, True, {"text": "x"}, [1, 2], [{"type": "image_url"}], [{"type": "text"}], [None]])


@mutation
def broken_tool_calls(rng, body):  # noqa: ANN001
    for m in body["messages"] if isinstance(body["messages"], list) else []:
        if isinstance(m, dict) and m.get("tool_calls"):
            m["tool_calls"] = rng.choice(["oops", [None], [{"id": None}], [{"function": "f"}], {}])
            return


@mutation
def orphan_result(rng, body):  # noqa: ANN001
    if isinstance(body["messages"], list):
            body["messages"].insert(rng.randint(0, len(body["messages"])), {"role": "tool", "tool_call_id": "nobody", "content": "x"})


@mutation
def bad_messages(rng, body):  # noqa: ANN001
    body["messages"] = rng.choice([None, "hi", {}, [None], [1, 2], [[]], []])


@mutation
def bad_output_limit(rng, body):  # noqa: ANN001
    body[rng.choice(["max_tokens", "max_completion_tokens"])] = rng.choice([-1, 0, "100", 1.5, True, None, 10**12])


@mutation
def many_messages(rng, body):  # noqa: ANN001
    if rng.random() < 0.02:
        body["messages"] = [{"role": "user" if i % 2 == 0 else "assistant", "content": "m %d" % i} for i in range(10_000)]


@mutation
def bad_tools(rng, body):  # noqa: ANN001
    body["tools"] = rng.choice(["x", [None], [{"type": "function"}], [{"function": {"name": 5, "parameters": "p"}}], {}])


@mutation
def nothing(rng, body):  # noqa: ANN001
    pass


def make(rng: random.Random) -> dict[str, Any]:
    msgs = conversation(rng)
    body: dict[str, Any] = anthropic(msgs) if rng.random() < 0.4 else {"model": "fuzz", "messages": msgs}
    for _ in range(rng.randint(0, 3)):
        rng.choice(MUTATIONS)(rng, body)
    return body


def check(engine: Engine, body: dict[str, Any]) -> str:
    snapshot = copy.deepcopy(body)
    try:
        fitted = engine.fit(body)
    except ContextWindowExceeded:
        return "rejected"
    except GuardError:
        return "bad_request"
    finally:
        if body != snapshot:
            raise AssertionError("the caller's body was mutated")
    report = fitted.report
    counter, _ = engine.counter_for("fuzz", engine.policy_for("fuzz"))
    fresh = TokenCounter(counter.encoding, factor=counter.factor, image_formula=counter.image_formula)
    recount = fresh.body(by_name(report.dialect), fitted.body)
    if recount != report.input_tokens_after or recount + report.max_tokens + report.safety_margin_tokens > report.context_window:
        raise AssertionError(f"fit does not fit: {recount} + {report.max_tokens} + {report.safety_margin_tokens} > {report.context_window}")
    return report.outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bodies", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    engine = Engine(
        load_policy_set({"defaults": {"default_max_tokens": 512, "safety_margin_tokens": 64}}),
        deployments={"fuzz": Deployment("fuzz", "gpt-4o", {"max_input_tokens": 4096, "max_output_tokens": 1024})},
        model_map=None,
    )
    counts: dict[str, int] = {}
    failures = 0
    slowest = (0.0, -1)
    start = time.perf_counter()
    for i in range(args.bodies):
        rng = random.Random(args.seed * 1_000_003 + i)
        body = make(rng)
        t = time.perf_counter()
        try:
            outcome = check(engine, body)
        except Exception as e:  # any other exception is a bug
            failures += 1
            outcome = "FAILED"
            if failures <= 5:
                print(f"body {i} (seed {args.seed}): {type(e).__name__}: {str(e)[:200]}")
                traceback.print_exc(limit=4)
        slowest = max(slowest, (time.perf_counter() - t, i))
        counts[outcome] = counts.get(outcome, 0) + 1
    took = time.perf_counter() - start
    print(f"{args.bodies:,} bodies in {took:.0f} s: " + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())))
    print(f"slowest body: #{slowest[1]} in {slowest[0] * 1000:.0f} ms; unhandled exceptions: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
