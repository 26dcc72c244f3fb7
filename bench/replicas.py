"""Replica safety over bench.sweep's loops: does a worker that never saw a conversation send what
the one that served every turn sends?

    .venv/bin/python -m bench.replicas [--ratios 0.3,0.5,0.7] [--match tau2/] [--corpus DIR] [--summarize]
        [--client NAME:N] [--outputs 2048-2303] [--factors 0.90,0.97:4] [--rollouts [--replies WORDS]]
        [--resends retry|rewind:7,3] [--tools toggle:6] [--jobs 2]

Each (ratio, loop) pair is replayed turn by turn (`bench.cache.requests`, default policy at that
share of the loop's size, no idle gaps) through one engine that serves every turn and, on every
turn, a new engine with no record of the conversation (another worker or replica, no shared store),
which must find the same cut by replaying the history. With `--summarize`, both ask one
`bench.cache.Scripted` summarizer, whose cache they share (as workers share a Redis summary cache).
Prints each row whose bytes differ on some turn (turn, tokens the served engine sent, tokens the
new one sent; "refused" where only the new one refused), then how many rows differ. Clients that
edit their history (Aider, Moatless Tools' requests as sent) are expected among them: for those,
the conversation's record in the shared store is what keeps workers in step (docs/operations.md).
`--corpus` replays a folder of converted loops instead (as `bench.sweep --corpus`: a family held out);
`--client` has every request edited as that client edits its history (as `bench.sweep --client`);
`--outputs` sets each request's `max_tokens` (as `bench.sweep --outputs`); `--factors`, a learned
calibration factor that changes during the loop (as `bench.sweep --factors`); `--tools`, a tool list
that changes during it (as `bench.sweep --tools`).

With `--rollouts`, the question is another one: rollouts of one task side by side (an eval harness's
samples, RL rollouts, an agent's retries) share the system prompt, tools and task, so one
conversation fingerprint and one record. Each loop and `another_rollout` of it (its replies as long,
their calls with other ids, its results and later user messages longer) are served taking turns
through one engine, and each alone through an engine of its own; a row differs where either sends
other bytes together than alone (the record of one taken for the other's). The record tells
rollouts apart by their replies and by the ids of their first calls, a text agent's (no call ids)
by the words of its first reply: where its rollouts reply the same words they are one history to
it (docs/operations.md), so its rows are marked and counted apart. `--replies " ok"`: the other
rollout's replies say a word more each (as a sampled model's differ).

With `--resends`, another again: a request the client sends again, through the engine that served
it. `retry`: every request twice in a row (an SDK's retry after a timeout or a 429: the OpenAI and
Anthropic SDKs retry twice by default); `rewind:7,3`: after every 7th turn the last 3 turns and
that one sent again, in order (an agent rewound to an earlier turn: Claude Code's /rewind, Codex's
backtrack, a harness that retries a failed step; here the branch asks again what it asked). A row
differs where a resend goes with other bytes than its first sending, which the provider's cache holds.
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# (loop, ratio, summarize, corpus[, client NAME:N[, words the rollout's replies add[, --outputs[, --factors
# [, --resends[, --tools]]]]]])
Task = tuple[Any, ...]


def differing(task: Task) -> tuple[str, float, list[tuple[Any, ...]]]:
    """The turns of one loop at one ratio where a new engine sends other bytes than the served one."""
    from bench.cache import STEP_SECONDS, Scripted, engine_for, factor_settings, fit, learning, requests, window_policy
    from guard.core.errors import ContextWindowExceeded

    name, ratio, summarize, body = _task(task)
    policy = window_policy(body, ratio, **factor_settings(body))
    now, turn = [0.0], [0]
    served = engine_for(body, policy, clock=lambda: now[0])
    learning(served, body, turn)
    summarizer = Scripted() if summarize else None
    out: list[tuple[Any, ...]] = []
    for t, request in enumerate(requests(body)):
        now[0] += STEP_SECONDS
        turn[0] = t
        other = engine_for(body, policy, clock=lambda: now[0])
        learning(other, body, turn)
        try:
            sent = fit(served, request, summarizer)
        except ContextWindowExceeded:  # (its newest turn alone over the room: refused by both)
            continue
        try:
            fresh = fit(other, request, summarizer)
        except ContextWindowExceeded:
            out.append((t, sent.report.input_tokens_after, "refused"))
            continue
        if json.dumps(fresh.body) != json.dumps(sent.body):
            out.append((t, sent.report.input_tokens_after, fresh.report.input_tokens_after))
    return name, ratio, out


def rollouts_differing(task: Task) -> tuple[str, float, list[tuple[Any, ...]]]:
    """The turns of one loop at one ratio where it or another rollout of it, served taking turns
    through one engine, sends other bytes than through an engine of its own: (turn, rollout, what it
    sent alone, what it sent beside the other), in tokens or "refused"."""
    from bench.cache import STEP_SECONDS, Scripted, engine_for, fit, requests, window_policy
    from guard.core.errors import ContextWindowExceeded

    name, ratio, summarize, body = _task(task)
    policy = window_policy(body, ratio)
    mine = list(requests(body))
    streams = [mine, [another_rollout(r, *task[5:6]) for r in mine]]

    def serve(engine: Any, summarizer: Any, request: dict[str, Any]) -> tuple[str, Any]:
        try:
            fitted = fit(engine, request, summarizer)
        except ContextWindowExceeded:
            return "refused", "refused"
        return json.dumps(fitted.body), fitted.report.input_tokens_after

    now = [0.0]
    alone: list[list[tuple[str, Any]]] = []
    for stream in streams:
        now[0] = 0.0
        engine, summarizer = engine_for(body, policy, clock=lambda: now[0]), Scripted() if summarize else None
        sent = []
        for request in stream:
            now[0] += STEP_SECONDS
            sent.append(serve(engine, summarizer, request))
        alone.append(sent)
    now[0] = 0.0
    shared, summarizer = engine_for(body, policy, clock=lambda: now[0]), Scripted() if summarize else None
    out: list[tuple[Any, ...]] = []
    for t in range(len(mine)):
        now[0] += STEP_SECONDS
        for k, stream in enumerate(streams):
            together = serve(shared, summarizer, stream[t])
            if together[0] != alone[k][t][0]:
                out.append((t, k, alone[k][t][1], together[1]))
    return name, ratio, out


def resends_differing(task: Task) -> tuple[str, float, list[tuple[Any, ...]]]:
    """The requests of one loop at one ratio, sent again as `--resends` says (`resent`) through
    the engine that served them, that go with other bytes than the first time: (turn, what it sent
    first, what it sent again), in tokens or "refused"."""
    from bench.cache import STEP_SECONDS, Scripted, engine_for, factor_settings, fit, learning, requests, window_policy
    from guard.core.errors import ContextWindowExceeded

    name, ratio, summarize, body = _task(task)
    policy = window_policy(body, ratio, **factor_settings(body))
    now, turn = [0.0], [0]
    engine, summarizer = engine_for(body, policy, clock=lambda: now[0]), Scripted() if summarize else None
    learning(engine, body, turn)
    asked = list(requests(body))
    first: dict[int, tuple[str, Any]] = {}
    out: list[tuple[Any, ...]] = []
    for t in resent(len(asked), task[8]):
        now[0] += STEP_SECONDS
        turn[0] = t
        try:
            fitted = fit(engine, asked[t], summarizer)
            sent: tuple[str, Any] = (json.dumps(fitted.body), fitted.report.input_tokens_after)
        except ContextWindowExceeded:
            sent = ("refused", "refused")
        if t not in first:
            first[t] = sent
        elif sent[0] != first[t][0]:
            out.append((t, first[t][1], sent[1]))
    return name, ratio, out


def resent(turns: int, spec: str) -> list[int]:
    """The order a client that sends requests again (`--resends`) sends a loop's `turns` in:
    `retry`, each twice; `rewind:E,B`, after every E-th turn the B before it and that one again."""
    if spec == "retry":
        return [t for t in range(turns) for _ in (0, 1)]
    kind, _, numbers = spec.partition(":")
    every, back = (int(v) for v in numbers.split(","))
    if kind != "rewind" or every < 1 or back < 0:
        raise ValueError(f"--resends: retry or rewind:EVERY,BACK, not {spec!r}")
    order: list[int] = []
    for t in range(turns):
        order.append(t)
        if t % every == every - 1:
            order += range(max(0, t - back), t + 1)
    return order


def _task(task: Task) -> tuple[str, float, bool, dict[str, Any]]:
    """A task's loop, ratio, whether to summarize, and the loop's body (as its client sends it)."""
    from bench.cache import outputs_of
    from bench.sweep import How, _loops

    name, ratio, summarize, corpus, *more = task
    # (the second: `rollouts_differing`'s replies; the fifth: `resends_differing`'s order)
    client, _, outputs, factors, _, tools = (*more, None, None, None, None, None, None)[:6]
    body = dict(dict(_loops(None, corpus))[name])
    return (
        name,
        ratio,
        summarize,
        How(client, outputs=outputs_of(outputs) if outputs else (), factors=factors, tools=tools).edited(body),
    )


def another_rollout(request: dict[str, Any], replies: str = "") -> dict[str, Any]:
    """The request as another rollout of its task sends it: the same system prompt, tools and task
    (the messages up to its first user turn), the model's replies as long (the same actions, as at
    temperature 0; with `replies`, each reply's words followed by those) but their calls with other
    ids (a provider's, made anew for each answer), and every later result and user message longer by
    8 to 32 words by its place (the other rollout's turns are not this one's, so its cuts fall
    elsewhere). A function of each message and its place, so the requests of a growing history stay
    one growing history."""
    from guard.dialects import detect

    dialect = detect(request)
    key = dialect.messages_key
    if not isinstance(request.get(key), list):  # (a Responses input of one string: no later turn)
        return request
    messages = list(request[key])
    task = next((i for i, m in enumerate(messages) if dialect.is_user_turn(m)), len(messages))

    def other(node: Any, words: str) -> Any:
        if isinstance(node, dict):
            return {k: _other_value(k, v, words) if isinstance(v, str) else other(v, words) for k, v in node.items()}
        return [other(v, words) for v in node] if isinstance(node, list) else node

    later = [
        other(m, replies if dialect.is_reply(m) else " again" * (8 * (1 + j % 4)))
        for j, m in enumerate(messages[task + 1 :])
    ]
    return {**request, key: messages[: task + 1] + later}


def _other_value(key: str, value: str, words: str) -> str:
    """A string of another rollout's message: a call's id made anew, a text longer by `words`."""
    if key in ("id", "tool_call_id", "tool_use_id", "call_id"):
        return value + "b"
    return value + words if key in ("content", "text", "output") and value else value


def main(argv: list[str] | None = None) -> None:
    from bench.sweep import _loops

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ratios", default="0.3,0.5,0.7")
    parser.add_argument("--match")
    parser.add_argument("--corpus", default=None, help="a folder of converted agent loops instead of the bench's")
    parser.add_argument("--summarize", action="store_true", help="with bench.cache's scripted summarizer")
    parser.add_argument("--rollouts", action="store_true", help="each loop beside another rollout of its task")
    parser.add_argument("--client", default=None, help="NAME:N (bench.clients): a client that edits its history")
    parser.add_argument(
        "--replies", default="", help="with --rollouts: words the other rollout's replies add (default: none)"
    )
    parser.add_argument("--outputs", default=None, help="max_tokens turn by turn, as bench.sweep --outputs")
    parser.add_argument("--factors", default=None, help="a learned factor that changes, as bench.sweep --factors")
    parser.add_argument("--resends", default=None, help="retry or rewind:EVERY,BACK: requests sent again")
    parser.add_argument("--tools", default=None, help="a tool list that changes, as bench.sweep --tools")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if args.resends:
        resent(8, args.resends)  # (a bad spec refused before the loops load)
    loops = _loops(args.match, args.corpus)
    texts = {n for n, body in loops if not calls_by_id(body)}
    ratios = [float(r) for r in args.ratios.split(",")]
    tasks = [
        (
            n,
            r,
            args.summarize,
            args.corpus,
            args.client,
            args.replies,
            args.outputs,
            args.factors,
            args.resends,
            args.tools,
        )
        for r in ratios
        for n, _ in loops
    ]
    rows = texts_differ = 0
    with ProcessPoolExecutor(args.jobs) as pool:
        how = rollouts_differing if args.rollouts else resends_differing if args.resends else differing
        for name, ratio, turns in pool.map(how, tasks, chunksize=1):
            if turns:
                rows += 1
                texts_differ += name in texts
                text = " (no call ids)" if name in texts else ""
                print(f"{ratio:<4} {name:<58} {len(turns)} turns{text}: {turns[:4]}", flush=True)
    print(f"rows whose bytes differ on some turn: {rows} of {len(tasks)}", end="")
    if args.rollouts:  # (a text agent's rollouts whose replies are the same are one history to the record)
        tool_rows = sum(n not in texts for n, _ in (t[:2] for t in tasks))
        print(f"; of loops whose replies call tools by id: {rows - texts_differ} of {tool_rows}", end="")
    print()


def calls_by_id(body: dict[str, Any]) -> bool:
    """Whether the loop's model calls tools by id (a text agent writes its actions in its replies)."""
    from guard.dialects import detect

    dialect = detect(body)
    return any(dialect.tool_call_ids(m) for m in dialect.messages(body) if dialect.is_reply(m))


if __name__ == "__main__":
    main()
