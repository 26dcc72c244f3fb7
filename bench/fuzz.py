"""Fuzz the engine and the proxy hook with malformed and extreme request bodies.

    .venv/bin/python -m bench.fuzz --bodies 100000 [--seed 0] [--target engine|hook|both]
                                   [--workers 2] [--huge-rate 0.03]

Bodies are valid agent conversations (chat, /v1/messages and Responses API bodies) mutated at random: wrong types and missing
fields, unknown roles, content as numbers/objects, broken tool calls, invalid and deeply nested
JSON in tool results, huge and empty texts, lone surrogates and control characters, orphan tool
results, and a few 10,000-message bodies. Every body must end in one of three ways:
- a fit that really fits (input recounted from scratch + output + margin <= window),
- a rejection (ContextWindowExceeded: a 400 with the numbers),
- a clear bad-request error (GuardError: a 400 naming the field),
never any other exception. Through the proxy hook (`--target hook`: `ContextGuard.async_pre_call_hook`
with a real `UserAPIKeyAuth`, then `async_pre_call_deployment_hook` on what it returns, with
`on_error: closed` so a guard bug raises instead of failing open), the same three ends are a
returned body that fits, the proxy's 400 rejection, or `litellm.BadRequestError` (400).

Body *i* of seed *s* is generated from its own `random.Random(s * 1_000_003 + i)`, so a run splits
over worker processes with the same bodies. `--huge-rate` is the share of texts that are a single
20k-200k character run (the costliest thing to count); the default 0.03 is the CI mix, the
1,000,000-body run used 0.003 to fit in an hour (still ~10% of bodies with such a run).

Prints the outcome counts, how many bodies had each trait and mutation, the slowest body, the
peak memory per worker, and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import resource
import time
import traceback
from collections import Counter
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from guard.core.config import Deployment  # noqa: E402
from guard.core.errors import ContextWindowExceeded, GuardError  # noqa: E402
from guard.core.policy import load_policy_set  # noqa: E402
from guard.core.tokens import TokenCounter  # noqa: E402
from guard.dialects import by_name  # noqa: E402
from guard.fit.engine import Engine  # noqa: E402

WORDS = 'the error in src/app.py line 42 failed import retry token window über 東京 данные ✓ {} [] " \\'.split()
ROLES = ["system", "user", "assistant", "tool", "developer", "function", "critic", "", None, 7]


HUGE_RATE = 0.03  # share of texts that are one 20k-200k character run (set by --huge-rate)


def text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.05 + HUGE_RATE:
        return "x" * rng.randint(20_000, 200_000)  # one long run without spaces
    if kind < 0.07 + HUGE_RATE:
        return "\ud800 lone surrogate \x00 nul \x1b esc"
    return " ".join(rng.choices(WORDS, k=rng.randint(1, 60)))


def json_text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.2:
        return "{" * rng.randint(1, 5000)  # invalid, deeply nested opening
    if kind < 0.3:
        depth = rng.randint(100, 3000)
        return "[" * depth + "1" + "]" * depth  # valid, deeply nested
    if kind < 0.5:
        return (
            '{"results": ['
            + ",".join(
                '{"id": %d, "metadata": {"embedding": [0.1, 0.2]}, "text": "%s"}' % (i, text(rng)[:200])
                for i in range(rng.randint(0, 80))
            )
            + "]}"
        )
    return '{"a": ' + text(rng)[:50]  # truncated JSON


def conversation(rng: random.Random) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": text(rng)}, {"role": "user", "content": text(rng)}]
    for t in range(rng.randint(0, 30)):
        cid = f"c{t}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            }
        )
        msgs.append(
            {"role": "tool", "tool_call_id": cid, "content": json_text(rng) if rng.random() < 0.5 else text(rng)}
        )
    msgs.append({"role": "user", "content": text(rng)})
    return msgs


def anthropic(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    out = []
    for m in msgs[1:]:
        if m.get("tool_calls"):
            out.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": c["id"], "name": "f", "input": {}} for c in m["tool_calls"]],
                }
            )
        elif m["role"] == "tool":
            out.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}],
                }
            )
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return {"model": "fuzz", "system": msgs[0]["content"], "messages": out, "max_tokens": 512}


def responses(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """The conversation as a Responses API body: instructions, input items (a reasoning item
    before every other call), max_output_tokens."""
    items: list[dict[str, Any]] = []
    for k, m in enumerate(msgs[1:]):
        if m.get("tool_calls"):
            if k % 2:
                items.append(
                    {"type": "reasoning", "id": f"rs_{k}", "summary": [], "encrypted_content": "gAAAAB" + "x" * 40}
                )
            items += [
                {"type": "function_call", "call_id": c["id"], "name": "f", "arguments": "{}"} for c in m["tool_calls"]
            ]
        elif m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        else:
            items.append(
                {"type": "message", "role": m["role"], "content": [{"type": "input_text", "text": m["content"]}]}
            )
    return {"model": "fuzz", "instructions": msgs[0]["content"], "input": items, "max_output_tokens": 512}


def _key(body: dict[str, Any]) -> str:
    return "input" if "input" in body else "messages"


MUTATIONS = []


def mutation(fn):  # noqa: ANN001
    MUTATIONS.append(fn)
    return fn


@mutation
def wrong_role(rng, body):  # noqa: ANN001
    m = rng.choice(body[_key(body)]) if isinstance(body[_key(body)], list) and body[_key(body)] else None
    if isinstance(m, dict):
        m["role"] = rng.choice(ROLES)


@mutation
def drop_field(rng, body):  # noqa: ANN001
    m = rng.choice(body[_key(body)]) if isinstance(body[_key(body)], list) and body[_key(body)] else None
    if isinstance(m, dict) and m:
        m.pop(rng.choice(list(m)), None)


@mutation
def wrong_content_type(rng, body):  # noqa: ANN001
    m = rng.choice(body[_key(body)]) if isinstance(body[_key(body)], list) and body[_key(body)] else None
    if isinstance(m, dict):
        m["content"] = rng.choice(
            [7, 3.5, True, {"text": "x"}, [1, 2], [{"type": "image_url"}], [{"type": "text"}], [None]]
        )


@mutation
def broken_tool_calls(rng, body):  # noqa: ANN001
    for m in body[_key(body)] if isinstance(body[_key(body)], list) else []:
        if isinstance(m, dict) and m.get("tool_calls"):
            m["tool_calls"] = rng.choice(["oops", [None], [{"id": None}], [{"function": "f"}], {}])
            return


@mutation
def orphan_result(rng, body):  # noqa: ANN001
    if isinstance(body[_key(body)], list):
        body[_key(body)].insert(
            rng.randint(0, len(body[_key(body)])), {"role": "tool", "tool_call_id": "nobody", "content": "x"}
        )


@mutation
def bad_messages(rng, body):  # noqa: ANN001
    body[_key(body)] = rng.choice([None, "hi", {}, [None], [1, 2], [[]], []])


@mutation
def bad_output_limit(rng, body):  # noqa: ANN001
    body[rng.choice(["max_tokens", "max_completion_tokens", "max_output_tokens"])] = rng.choice(
        [-1, 0, "100", 1.5, True, None, 10**12]
    )


@mutation
def many_messages(rng, body):  # noqa: ANN001
    if rng.random() < 0.02:
        body[_key(body)] = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": "m %d" % i} for i in range(10_000)
        ]


@mutation
def bad_tools(rng, body):  # noqa: ANN001
    body["tools"] = rng.choice(
        ["x", [None], [{"type": "function"}], [{"function": {"name": 5, "parameters": "p"}}], {}]
    )


@mutation
def responses_items(rng, body):  # noqa: ANN001
    """Responses API oddities: a trailing reasoning item, an output of the wrong type, unknown or
    opaque items, input as one string."""
    if "input" not in body or not isinstance(body["input"], list):
        return
    body["input"].insert(
        rng.randint(0, len(body["input"])),
        rng.choice(
            [
                {"type": "reasoning", "id": "rs_x", "encrypted_content": None},
                {
                    "type": "function_call_output",
                    "call_id": "c0",
                    "output": rng.choice([5, {"a": 1}, None, [{"type": "input_image"}]]),
                },
                {"type": "item_reference", "id": "msg_1"},
                {"type": "compaction", "encrypted_content": "x" * 200},
                {"type": "web_search_call", "id": "ws_1", "status": "completed"},
                {"type": 7},
                {"type": "message", "role": None, "content": "x"},
            ]
        ),
    )
    if rng.random() < 0.2:
        body["input"] = text(rng)


@mutation
def media_parts(rng, body):  # noqa: ANN001
    """Images, audio, files and screenshots, well and badly formed, as parts of a message or of a
    tool result, and as the Responses items that carry them."""
    items = body[_key(body)]
    if not isinstance(items, list):
        return
    b64 = rng.choice(["", "UklGRiQAAABXQVZF", "UklGR" + "A" * 90, "iVBORw0KGgo=", "not base64!!", "==", "A" * 3001])
    part = rng.choice(
        [
            {
                "type": "input_audio",
                "input_audio": rng.choice([{"data": b64, "format": "wav"}, {"data": 5}, None, "x"]),
            },
            {
                "type": "file",
                "file": rng.choice([{"file_data": "data:application/pdf;base64," + b64}, {"file_id": 7}, 3]),
            },
            {"type": "image_url", "image_url": rng.choice([{"url": "data:image/png;base64," + b64}, {"url": None}, 9])},
            {"type": "image", "source": rng.choice([{"type": "base64", "data": b64}, {"type": "url"}, []])},
            {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}]},
            {"type": "document", "source": {"type": "base64", "data": b64}},
            7,
        ]
    )
    if "input" in body:
        output = rng.choice(
            [
                {"type": "computer_screenshot", "image_url": "data:image/png;base64," + b64},
                {"file_id": 3},
                "x",
                None,
                [part],
            ]
        )
        item = rng.choice(
            [
                {"type": "computer_call_output", "call_id": "c0", "output": output},
                {"type": "image_generation_call", "id": "ig", "result": rng.choice([b64, 5, None])},
                {
                    "type": "function_call_output",
                    "call_id": "c0",
                    "output": [part, {"type": "input_text", "text": "t"}],
                },
            ]
        )
        items.insert(rng.randint(0, len(items)), item)
        return
    for m in rng.sample(items, min(3, len(items))):
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if (
            isinstance(content, list)
            and content
            and isinstance(content[0], dict)
            and content[0].get("type") == "tool_result"
        ):
            content[0] = {**content[0], "content": [part, {"type": "text", "text": "r"}]}
        else:
            m["content"] = [part] + ([{"type": "text", "text": content}] if isinstance(content, str) else [])


@mutation
def nothing(rng, body):  # noqa: ANN001
    pass


def make(rng: random.Random) -> tuple[dict[str, Any], list[str]]:
    """A body and its traits (dialect, mutations applied, and what makes it extreme)."""
    msgs = conversation(rng)
    pick = rng.random()
    body: dict[str, Any] = (
        anthropic(msgs) if pick < 0.3 else responses(msgs) if pick < 0.6 else {"model": "fuzz", "messages": msgs}
    )
    traits = [_dialect(body)]
    for _ in range(rng.randint(0, 3)):
        fn = rng.choice(MUTATIONS)
        fn(rng, body)
        traits.append(fn.__name__)
    return body, traits + _extremes(body)


def _dialect(body: dict[str, Any]) -> str:
    return "responses" if "instructions" in body else "anthropic" if "system" in body else "openai"


def _extremes(body: dict[str, Any]) -> list[str]:
    out = []
    msgs = body.get(_key(body))
    if isinstance(msgs, list) and len(msgs) >= 10_000:
        out.append("10k_messages")
    texts = (
        [body.get("system")] + [m.get("content") for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []
    )
    texts += (
        [
            b.get("content")
            for m in msgs
            if isinstance(m, dict) and isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict)
        ]
        if isinstance(msgs, list)
        else []
    )
    strings = [t for t in texts if isinstance(t, str)]
    if any(len(t) >= 20_000 for t in strings):
        out.append("huge_text")
    if any(t.startswith(("[[[[", "{{{{")) for t in strings):
        out.append("deep_or_invalid_nested_json")
    if any("\ud800" in t for t in strings):
        out.append("lone_surrogate_nul")
    return out


def _fits(engine: Engine, body: dict[str, Any], report: Any) -> None:
    counter, _ = engine.counter_for("fuzz", engine.policy_for("fuzz"))
    fresh = TokenCounter(
        counter.encoding, factor=counter.factor, image_formula=counter.image_formula, tool_framing=counter.tool_framing
    )
    recount = fresh.body(by_name(report["dialect"] if isinstance(report, dict) else report.dialect), body)
    after = report["input_tokens_after"] if isinstance(report, dict) else report.input_tokens_after
    if isinstance(report, dict):
        out, margin, window = report["max_tokens"], report["safety_margin_tokens"], report["context_window"]
    else:
        out, margin, window = report.max_tokens, report.safety_margin_tokens, report.context_window
    if recount != after or recount + out + margin > window:
        raise AssertionError(f"fit does not fit: {recount} (reported {after}) + {out} + {margin} > {window}")


def check(engine: Engine, body: dict[str, Any]) -> str:
    snapshot = repr(body)  # the caller's body must come back unchanged (repr: a cheap deep snapshot)
    try:
        fitted = engine.fit(body)
    except ContextWindowExceeded:
        return "rejected"
    except GuardError:
        return "bad_request"
    finally:
        if repr(body) != snapshot:
            raise AssertionError("the caller's body was mutated")
    _fits(engine, fitted.body, fitted.report)
    return fitted.report.outcome


class HookTarget:
    """The proxy's path: the pre-call hook (as the proxy calls it, with a real UserAPIKeyAuth and
    the metadata the proxy adds), then the deployment hook on what it returned."""

    def __init__(self, engine: Engine) -> None:
        import litellm
        from litellm.proxy._types import ProxyException, UserAPIKeyAuth

        from guard.shell.callback import ContextGuard

        self.engine, self.litellm = engine, litellm
        self.guard = ContextGuard(engine=engine)
        self.auth = UserAPIKeyAuth(api_key="sk-fuzz", team_id="team-fuzz", key_alias="fuzz-key")
        self.proxy_exception = ProxyException
        self.loop = asyncio.new_event_loop()

    def check(self, body: dict[str, Any], i: int) -> str:
        dialect = _dialect(body)
        call_type = {"anthropic": "anthropic_messages", "responses": "aresponses"}.get(dialect, "acompletion")
        md_key = "metadata" if dialect == "openai" else "litellm_metadata"
        data = {
            **body,
            md_key: {"user_api_key_team_id": "team-fuzz", "user_api_key_hash": "h"},
            "litellm_call_id": f"fuzz-{i}",
        }
        snapshot = repr(body)
        try:
            out = self.loop.run_until_complete(self.guard.async_pre_call_hook(self.auth, None, data, call_type))
            out = self.loop.run_until_complete(
                self.guard.async_pre_call_deployment_hook(
                    {
                        **out,
                        md_key: {**out.get(md_key, {}), "model_group": "fuzz"},
                        "model": "gpt-4o",
                        "model_info": {"max_input_tokens": 4096, "max_output_tokens": 1024},
                    },
                    call_type,
                )
            )
        except self.proxy_exception as e:
            if str(getattr(e, "code", "")) != "400":
                raise
            return "rejected"
        except self.litellm.BadRequestError:
            return "bad_request"
        finally:
            if repr(body) != snapshot:
                raise AssertionError("the caller's body was mutated")
        report = out.get(md_key, {}).get("context_guard")
        if not isinstance(report, dict) or "outcome" not in report:
            raise AssertionError("the hook returned a body without the guard's report")
        if report["outcome"] == "rejected":
            raise AssertionError("a rejected body was forwarded")
        _fits(
            self.engine,
            {k: v for k, v in out.items() if k not in (md_key, "litellm_call_id", "model_info")},
            {**report, "dialect": dialect},
        )
        return "fitted" if report["outcome"] == "fitted" else "unchanged"


def make_engine(on_error: str = "open") -> Engine:
    return Engine(
        load_policy_set({"defaults": {"default_max_tokens": 512, "safety_margin_tokens": 64, "on_error": on_error}}),
        deployments={"fuzz": Deployment("fuzz", "gpt-4o", {"max_input_tokens": 4096, "max_output_tokens": 1024})},
        model_map=None,
    )


_TARGETS: dict[str, tuple[Engine, HookTarget | None]] = {}


def _targets(target: str) -> tuple[Engine, HookTarget | None]:
    """One engine (and hook) per worker process, kept across its slices: memory that grows with
    the number of bodies would show in the peak RSS printed per slice."""
    if target not in _TARGETS:
        engine = make_engine(on_error="closed")
        _TARGETS[target] = (engine, HookTarget(engine) if target in ("hook", "both") else None)
    return _TARGETS[target]


def run_slice(job: tuple[int, int, int, str, float]) -> dict[str, Any]:
    """Bodies [start, stop) of a seed through a target; the tallies of this slice."""
    seed, start, stop, target, huge_rate = job
    global HUGE_RATE
    HUGE_RATE = huge_rate
    engine, hook = _targets(target)
    outcomes: Counter[str] = Counter()
    traits: Counter[str] = Counter()
    errors: list[str] = []
    slowest = (0.0, -1, "")
    for i in range(start, stop):
        body, kinds = make(random.Random(seed * 1_000_003 + i))
        traits.update(set(kinds))
        for name in ("engine", "hook"):
            if target not in (name, "both"):
                continue
            t = time.perf_counter()
            try:
                outcome = check(engine, body) if name == "engine" else hook.check(body, i)  # type: ignore[union-attr]
            except Exception as e:  # any other exception is a bug
                outcome = "FAILED"
                if len(errors) < 5:
                    errors.append(
                        f"body {i} (seed {seed}, {name}): {type(e).__name__}: {str(e)[:200]}\n{traceback.format_exc(limit=4)}"
                    )
            slowest = max(slowest, (time.perf_counter() - t, i, name))
            outcomes[f"{name}:{outcome}"] += 1
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"outcomes": outcomes, "traits": traits, "errors": errors, "slowest": slowest, "rss_mb": rss_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bodies", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", choices=["engine", "hook", "both"], default="engine")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--huge-rate", type=float, default=HUGE_RATE, help="share of texts that are one 20k-200k char run"
    )
    parser.add_argument("--chunk", type=int, default=2_000, help="bodies per job handed to a worker")
    args = parser.parse_args(argv)
    jobs = [
        (args.seed, a, min(a + args.chunk, args.bodies), args.target, args.huge_rate)
        for a in range(0, args.bodies, args.chunk)
    ]
    start = time.perf_counter()
    outcomes: Counter[str] = Counter()
    traits: Counter[str] = Counter()
    errors: list[str] = []
    slowest = (0.0, -1, "")
    rss: list[float] = []
    done = 0
    if args.workers > 1:
        pool = multiprocessing.get_context("fork").Pool(args.workers)
        results = pool.imap_unordered(run_slice, jobs)
    else:
        pool, results = None, map(run_slice, jobs)
    for r in results:
        outcomes.update(r["outcomes"])
        traits.update(r["traits"])
        errors += r["errors"]
        slowest = max(slowest, r["slowest"])
        rss.append(r["rss_mb"])
        done += sum(r["traits"][k] for k in ("openai", "anthropic"))
        if args.bodies >= 50_000 and len(rss) % 25 == 0:
            print(
                f"  {done:,} bodies, {time.perf_counter() - start:.0f} s, failures so far {sum(v for k, v in outcomes.items() if k.endswith('FAILED'))}",
                flush=True,
            )
    if pool is not None:
        pool.close()
        pool.join()
    took = time.perf_counter() - start
    failures = sum(v for k, v in outcomes.items() if k.endswith("FAILED"))
    for e in errors[:5]:
        print(e)
    print(
        f"{args.bodies:,} bodies (seed {args.seed}, target {args.target}, huge-rate {args.huge_rate}) in {took:.0f} s on {args.workers} worker(s)"
    )
    print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())))
    print("bodies with: " + ", ".join(f"{k} {v:,}" for k, v in sorted(traits.items())))
    first, last = rss[: max(1, len(rss) // 10)], rss[-max(1, len(rss) // 10) :]
    print(f"slowest body: #{slowest[1]} ({slowest[2]}) in {slowest[0] * 1000:.0f} ms")
    print(
        f"peak RSS of a worker: {max(first):.0f} MB after its first slices, {max(last):.0f} MB at the end ({len(rss)} slices of {args.chunk:,})"
    )
    print(f"unhandled exceptions: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
