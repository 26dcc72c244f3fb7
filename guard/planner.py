"""The planner: count, budget, run strategies least destructive first, fit or reject.

`plan()` is a generator and does no I/O. When the policy allows summarization and the driver can
summarize, it yields a `SummaryRequest` and expects the summary text (or None) to be sent back;
`run()` drives it synchronously, and an async shell can drive the same generator with awaits.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Generator, Mapping

from guard.budget import Budget, make_budget, requested_output
from guard.conversation import Context, Conversation
from guard.dialects import MARKER_PREFIX, Dialect
from guard import relevance, summary
from guard.errors import ContextWindowExceeded, Shortfall
from guard.limits import ModelLimits
from guard.policy import STRATEGY_ORDER, Policy
from guard.report import Report, Skipped
from guard.strategies import STRATEGIES
from guard.strategies.drop import drop_messages, droppable_groups
from guard.tokens import TokenCounter

SUMMARY_MARK = MARKER_PREFIX + " summary of {m} earlier messages ({n} tokens)]\n"


@dataclass(frozen=True)
class SummaryRequest:
    """The span of older messages the planner wants summarized, and the summary's budget."""

    dialect: str
    messages: tuple[Mapping[str, Any], ...]
    span_tokens: int
    max_tokens: int


@dataclass(frozen=True)
class SummaryAnswer:
    """What a driver sends back for a SummaryRequest: the summary, or why there is none.

    `source` says where it came from ("cache" or "llm"), `calls` how many LLM calls it took.
    A plain string (or None) is accepted too."""

    text: str | None
    reason: str | None = None
    source: str = "llm"
    calls: int = 0


@dataclass(frozen=True)
class Fitted:
    body: dict[str, Any]
    report: Report


Plan = Generator[SummaryRequest, "str | None", Fitted]


def plan(
    body: Mapping[str, Any],
    *,
    dialect: Dialect,
    limits: ModelLimits,
    policy: Policy,
    counter: TokenCounter,
    exact: bool,
    can_summarize: bool = False,
) -> Plan:
    messages = dialect.messages(body)
    key = dialect.output_key(body, limits.model)
    requested = requested_output(body, key)
    budget, source = make_budget(limits, policy, requested)
    counts = counter.messages(dialect, messages)
    fixed = counter.fixed(dialect, body)
    before = fixed + sum(counts)
    ctx = Context(counter=counter, policy=policy, stop_at=budget.stop_at(before))
    if policy.relevance == "bm25":
        ctx.relevance = functools.partial(_relevant_origins, dialect, tuple(messages))
    conv = _Unchanged(dialect, tuple(messages), tuple(counts), fixed)

    if not budget.fits(before):
        conv = Conversation.build(dialect, messages, counts, fixed, policy.keep_recent_groups, policy.keep_first_user_turn)
        budget = _clamp_output(budget, before, policy, ctx)
        ctx.stop_at, ctx.floor, ctx.target = budget.stop_at(before), budget.floor, budget.target
        start = conv
        conv = yield from _rounds(conv, ctx, policy, can_summarize)
        kinds = {a.kind for a in ctx.actions}
        if "drop_oldest_turns" in kinds and "summarize" not in kinds:
            conv, ctx = _without_wasted_cuts(start, conv, ctx, policy)

    after = conv.total
    fitted = budget.fits(after)
    changed = conv.messages != tuple(messages)
    report = Report(
        model=limits.model,
        dialect=dialect.name,
        window_rule=limits.rule,
        context_window=limits.context_window,
        max_input_tokens=limits.max_input_tokens,
        max_output_tokens=limits.max_output_tokens,
        limits_source=limits.source,
        input_tokens_before=before,
        input_tokens_after=after,
        max_tokens=budget.reserved_output,
        max_tokens_requested=requested,
        max_tokens_source=source if not any(a.kind == "clamp_output" for a in ctx.actions) else "clamped_by_policy",
        output_key=key,
        safety_margin_tokens=budget.margin,
        room=budget.room,
        target=budget.target,
        fits=fitted,
        outcome="fitted" if changed or ctx.actions else "unchanged",
        exact_count=exact,
        calibration_factor=counter.factor,
        messages_before=len(messages),
        messages_after=len(conv.messages),
        actions=ctx.actions,
        skipped=ctx.skipped,
        breakdown=_breakdown(conv, counter, body),
        summary=ctx.summary,
    )
    if not fitted:
        report.outcome = "rejected"
        report.reason = "no allowed strategy brings the input within the room"
        shortfall = Shortfall(limits.model, limits.rule, limits.max_input_tokens, after, budget.reserved_output, budget.margin)
        raise ContextWindowExceeded(shortfall, report)
    out = dict(body)
    if changed:
        out["messages"] = list(conv.messages)
        report.fitted_messages_sha256 = _sha256(out["messages"])
    out[key] = budget.reserved_output
    return Fitted(out, report)


@dataclass(frozen=True)
class _Unchanged:
    """The fast path's stand-in for a Conversation: a request that fits needs no grouping."""

    dialect: Dialect
    messages: tuple[Mapping[str, Any], ...]
    counts: tuple[int, ...]
    fixed: int

    @property
    def total(self) -> int:
        return self.fixed + sum(self.counts)


def _rounds(conv: Conversation, ctx: Context, policy: Policy, can_summarize: bool) -> Generator[SummaryRequest, "str | None", Conversation]:
    """Run the strategies in order until the stop mark. Round 1 counts lossless rewrites by
    estimate; settling makes every count exact, and if the estimates were optimistic, round 2
    carries on from there with exact counts only."""
    for estimate in (True, False):
        ctx.estimate = estimate
        for name in STRATEGY_ORDER:
            if ctx.done(conv):
                break
            if name == "clamp_output" or not policy.allows(name) or name in ctx.exhausted:
                continue
            if name == "summarize":
                if can_summarize and estimate:
                    conv = yield from _summarize(conv, ctx)
                continue
            conv = STRATEGIES[name](conv, ctx)
        conv = conv.settled(ctx)
        if ctx.done(conv):
            break
    return conv


def _without_wasted_cuts(start: Conversation, fitted: Conversation, ctx: Context, policy: Policy) -> tuple[Conversation, Context]:
    """Once turns had to be dropped, redo the other cuts on what is kept: truncations made before
    the drop on results that stayed may no longer be needed (less lost, more of the room used)."""
    dropped = set(range(len(start.messages))) - set(fitted.origin)
    again = Context(
        counter=ctx.counter,
        policy=policy,
        stop_at=ctx.stop_at,
        floor=ctx.floor,
        target=ctx.target,
        skipped=list(ctx.skipped),
        relevance=ctx.relevance,
        _relevant=ctx._relevant,
    )
    for action in ctx.actions:
        if action.kind == "clamp_output":
            again.record(action.kind, action.tokens_saved, action.items)
    conv = drop_messages(start, again, dropped)
    again.exhausted.add("drop_oldest_turns")
    conv = _drained(_rounds(conv, again, policy, can_summarize=False))  # never yields: no summaries
    if again.done(conv) and conv.total > fitted.total:
        return conv, again
    return fitted, ctx


def _drained(gen: Generator[SummaryRequest, "str | None", Conversation]) -> Conversation:
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _clamp_output(budget: Budget, total: int, policy: Policy, ctx: Context) -> Budget:
    """Lower the reserved output toward the policy floor (shared windows only, if allowed)."""
    floor = policy.min_output_tokens
    if (
        not policy.allows("clamp_output")
        or floor is None
        or budget.limits.rule != "shared"
        or budget.reserved_output <= floor
    ):
        return budget
    needed = budget.limits.max_input_tokens - budget.margin - total  # output that would fit as is
    new = max(floor, min(budget.reserved_output, needed))
    ctx.record("clamp_output", budget.reserved_output - new, 1)
    return budget.with_output(new)


def _summarize(conv: Conversation, ctx: Context) -> Generator[SummaryRequest, "str | SummaryAnswer | None", Conversation]:
    """Replace one contiguous span of older turn groups with a marked summary. The span is the
    oldest run of groups the last user message is not about that saves enough; if there is none,
    simply the oldest groups. Within one band (see Budget.stop_at) the span is the same turn after
    turn, so its cached summary keeps the prefix byte-identical."""
    span, tokens = _span(conv, ctx, conv.total - ctx.stop_at + ctx.policy.summary_max_tokens)
    if not span:
        ctx.skipped.append(Skipped("summarize", "nothing_to_summarize"))
        return conv
    request = SummaryRequest(
        dialect=conv.dialect.name,
        messages=tuple(conv.messages[i] for i in span),
        span_tokens=tokens,
        max_tokens=ctx.policy.summary_max_tokens,
    )
    answer = yield request
    if not isinstance(answer, SummaryAnswer):
        answer = SummaryAnswer(answer if isinstance(answer, str) else None, None if isinstance(answer, str) else "no_summary")
    ctx.summary = {"source": answer.source, "calls": answer.calls, "span_messages": len(span), "span_tokens": tokens}
    if not isinstance(answer.text, str) or not answer.text.strip():
        ctx.skipped.append(Skipped("summarize", answer.reason or "summary_empty"))
        return conv
    msg = conv.dialect.marker(SUMMARY_MARK.format(m=len(span), n=tokens) + answer.text.strip())
    count = ctx.counter.message(conv.dialect, msg)
    if count >= tokens:
        ctx.skipped.append(Skipped("summarize", "summary_not_shorter"))
        return conv
    ctx.summary["summary_tokens"] = count
    ctx.record("summarize", tokens - count, len(span))
    return conv.replacing(set(span), {span[0]: (msg, count)})


def _span(conv: Conversation, ctx: Context, needed: int) -> tuple[list[int], int]:
    """The messages to summarize: contiguous whole groups worth at least `needed` tokens (or all
    there are), preferring the oldest run that holds nothing the last user message is about."""
    groups = droppable_groups(conv)
    runs: list[list[list[int]]] = []
    for group in groups:  # contiguous runs of droppable groups
        if runs and runs[-1][-1][-1] + 1 == group[0]:
            runs[-1].append(group)
        else:
            runs.append([group])
    hot = ctx.relevant() if ctx.relevance is not None else frozenset()
    if hot:
        for run in runs:  # split each run at the groups the question is about
            cool: list[list[int]] = []
            for group in run + [[]]:
                if group and not any(conv.origin[i] in hot for i in group):
                    cool.append(group)
                    continue
                picked = _take(conv, cool, needed)
                if picked[1] >= needed:
                    return picked
                cool = []
    return _take(conv, runs[0] if runs else [], needed)


def _take(conv: Conversation, run: list[list[int]], needed: int) -> tuple[list[int], int]:
    span: list[int] = []
    tokens = 0
    for group in run:
        span += group
        tokens += sum(conv.counts[i] for i in group)
        if tokens >= needed:
            break
    return span, tokens


def _relevant_origins(dialect: Dialect, messages: tuple[Mapping[str, Any], ...]) -> frozenset[int]:
    """Indices of the messages (not system, not the last user turn) the last user message is about."""
    users = [i for i, m in enumerate(messages) if dialect.is_user_turn(m)]
    if not users:
        return frozenset()
    lines = summary.transcript(dialect, messages)
    last = users[-1]
    candidates = [i for i, m in enumerate(messages) if i != last and not dialect.is_system(m)]
    query = lines[last].split("] ", 1)[-1]  # without the "[user]" label every user line would share
    scores = relevance.scores(query, [lines[i] for i in candidates])
    return frozenset(candidates[j] for j in relevance.relevant(scores))


def _breakdown(conv: Conversation | _Unchanged, counter: TokenCounter, body: Mapping[str, Any]) -> dict[str, int]:
    system = tool_results = history = 0
    for msg, n in zip(conv.messages, conv.counts):
        if conv.dialect.is_system(msg):
            system += n
        elif conv.dialect.tool_results(msg) and not conv.dialect.is_user_turn(msg):
            tool_results += n
        else:
            history += n
    if "system" in body:
        system_only = counter.fixed(conv.dialect, {"system": body["system"]}) - counter.fixed(conv.dialect, {})
        system += system_only
    return {
        "system": system,
        "history": history,
        "tool_results": tool_results,
        "tools_and_framing": conv.total - system - history - tool_results,
    }


def _sha256(value: Any) -> str:
    data = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)  # key order is kept
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def run(p: Plan, summarize: Callable[[SummaryRequest], "str | None"] | None = None) -> Fitted:
    """Drive a plan synchronously; a failing summarizer counts as no summary."""
    try:
        request = next(p)
        while True:
            try:
                answer = summarize(request) if summarize else None
            except Exception:  # the deterministic path must go on
                answer = None
            request = p.send(answer)
    except StopIteration as stop:
        return stop.value
