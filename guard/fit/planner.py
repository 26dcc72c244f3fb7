"""The planner: count, budget, run strategies least destructive first, fit or reject.

`plan()` is a generator and does no I/O. When the policy allows summarization and the driver can
summarize, it yields a `SummaryRequest` and expects the summary text (or None) to be sent back;
`run()` drives it synchronously, and an async shell can drive the same generator with awaits.

Its steps live in modules of their own: `carried` (the cut a past turn made, carried while it
fits; with a summarizer, `cut_summaries`), `rounds` (the strategies in order), `spans`
(summaries), `questions` (relevance) and `reporting` (the report).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, cast

from guard.core import reasoning
from guard.core.budget import OUTPUT_KEYS, Budget
from guard.core.errors import ContextWindowExceeded, Shortfall
from guard.core.policy import Policy
from guard.core.report import Report, Skipped
from guard.core.steps import CLAMP, SUMMARIZE
from guard.fit.carried import carried
from guard.fit.conversation import Context, Conversation, Keeping
from guard.fit.edited import LastCut
from guard.fit.marks import Marks
from guard.fit.questions import history_of
from guard.fit.reporting import Fit, Unchanged, build_report
from guard.fit.request import Counted, Resolved
from guard.fit.rounds import fit
from guard.fit.spans import SUMMARY_MARK, CachedSummaries, SummaryAnswer, SummaryRequest, WithheldSummary
from guard.fit.temperature import Anchor, Temperature


@dataclass(frozen=True)
class Fitted:
    """A fitted request body (a new object; the caller's is untouched) and the report of the fit."""

    body: dict[str, Any]
    report: Report


Plan = Generator["SummaryRequest | CachedSummaries", Any, Fitted]  # (`WithheldSummary` is a CachedSummaries)


class Carry(NamedTuple):
    """Where a fit's cut came from: the leading messages it was decided on (None: the whole
    request), the anchor it was carried from (a cold cache's) and the conversation's record of it."""

    cut_from: int | None = None
    anchor: Anchor | None = None
    last: LastCut | None = None


def plan(
    body: Mapping[str, Any],
    resolved: Resolved,
    *,
    can_summarize: bool = False,
    temperature: Temperature | None = None,
    replay: bool = True,
) -> Plan:
    """The fit of `body` with what was `resolved` for it; `temperature`, `replay`: see `carried` (None:
    nothing known of the conversation's provider cache, the stateless replay)."""
    policy = resolved.policy
    req = Counted.of(body, resolved)
    terms = reasoning.Terms(
        resolved.family,
        resolved.limits.model,
        req.requested,
        policy.thinking_without_room,
        resolved.adaptive_thinking,
    )
    budget = req.budget
    # a cap without room for the thinking budget: refused now
    reasoned = reasoning.fit_reasoning(body, terms, budget.reserved_output)
    floor = reasoning.output_floor(body, resolved.family, resolved.adaptive_thinking)
    ctx = _context(req, resolved)
    conv: Conversation | Unchanged = Unchanged(req.dialect, req.messages, req.counts, req.fixed)
    carry = Carry()
    if not budget.fits(req.before):
        budget = _clamp_output(budget, req.before, policy, ctx, floor)
        conv, ctx, carry = yield from _answered_or_not(req, budget, ctx, temperature, can_summarize, replay)
        if budget.reserved_output != req.budget.reserved_output:
            reasoned = reasoning.fit_reasoning(body, terms, budget.reserved_output)
    source = "clamped_by_policy" if any(a.kind == CLAMP for a in ctx.actions) else req.source
    if req.requested is not None and budget.reserved_output < req.requested and source != "clamped_by_policy":
        ctx.record(CLAMP, 0, 1)  # lowered to a model or policy cap: an action, not "unchanged"
    updates, thinking = reasoned
    if thinking:
        ctx.record("clamp_thinking", 0, len(thinking))
    outcome = Fit(budget, ctx, conv, source, temperature, carry.anchor, thinking, carry.last)
    report = build_report(req, resolved, outcome)
    return _finished(req, budget, conv, report, updates, carry.cut_from)


def _counted_with(carry: Carry, factor: float) -> Carry:
    """`carry`, its anchor and record marked as counted with the calibration factor `factor` (see
    `guard.fit.factor_change`)."""
    anchor = replace(carry.anchor, factor=factor) if carry.anchor is not None else None
    last = carry.last.counted_with(factor) if carry.last is not None else None
    return carry._replace(anchor=anchor, last=last)


def _context(req: Counted, resolved: Resolved) -> Context:
    """The fit's context: the request's marks, its messages as sent, their transcript (rendered on
    first use) and, with BM25 relevance, what the last question is about; counted with a factor
    other than today's, the room its carried cut is checked against (`Resolved.checked_room`)."""
    policy, room = resolved.policy, req.budget.room
    history = history_of(req.dialect, req.messages, req.counts, policy.relevance == "bm25")
    marks = Marks(req.budget.stop_at(req.before))
    ctx = Context(counter=resolved.counter, policy=policy, marks=marks, history=history)
    checked = resolved.checked_room(room, len(req.messages))
    ctx.carry_room = checked if checked != room else None
    return ctx


def _answered_or_not(
    req: Counted,
    budget: Budget,
    ctx: Context,
    temperature: Temperature | None,
    can_summarize: bool,
    replay: bool,
) -> Generator[Any, Any, tuple[Conversation, Context, Carry]]:
    """`_over_room`; where its fit ends over the room with the words a long last user message
    answers pinned (`Policy.keep_answered_share`: they may leave the newest turns no room), fitted
    again without them: a preference, never a refusal of a request that fits without it."""
    start = _copied(ctx)
    conv, ctx, carry = yield from _over_room(req, budget, ctx, temperature, can_summarize, replay)
    if conv.total <= (start.carry_room or budget.room) or start.policy.keep_answered_share is None:
        return conv, ctx, carry
    plain = start.policy.model_copy(update={"keep_answered_share": None})
    build = functools.partial(Conversation.build, req.dialect, req.messages, req.counts, req.fixed)
    if build(Keeping.of(start.policy, budget)).pinned == build(Keeping.of(plain, budget)).pinned:
        return conv, ctx, carry  # (nothing pinned for the request: a refusal either way)
    retried = yield from _over_room(req, budget, replace(start, policy=plain), temperature, can_summarize, replay)
    if retried[0].total > budget.room:
        return conv, ctx, carry
    retried[1].summarized.calls += ctx.summarized.calls - start.summarized.calls  # (both tries')
    return retried


def _over_room(
    req: Counted,
    budget: Budget,
    ctx: Context,
    temperature: Temperature | None,
    can_summarize: bool,
    replay: bool,
) -> Generator[Any, Any, tuple[Conversation, Context, Carry]]:
    """A request over its room: the band's carried cut where one fits (with a summarizer, its prefix
    summarized: see `carried`), else the strategies on the whole request."""
    policy = ctx.policy
    summarizing = can_summarize and policy.allows(SUMMARIZE)
    made = yield from carried(req, budget, ctx, temperature, summarizing, replay)
    if made is not None:
        conv, ctx, m, anchor, last = made
        return conv, ctx, _counted_with(Carry(m, anchor, last), ctx.counter.factor)
    full = Conversation.build(req.dialect, req.messages, req.counts, req.fixed, Keeping.of(policy, budget))
    ctx.marks = Marks.of(budget, req.before)
    before = _copied(ctx) if summarizing else ctx
    conv, ctx = yield from fit(full, ctx, policy, summarizing)
    if summarizing and conv.total > budget.room:
        # the summarizer's path ended over the room (a summary that took room the cuts after it
        # could not make up): the deterministic path, never a refusal of a request it fits; its
        # policy without the summarize step, which it would report skipped as `no_summarizer`
        steps = [s for s in policy.strategies if s != SUMMARIZE]
        plain_policy = policy.model_copy(update={"strategies": steps})
        plain, without = yield from fit(full, replace(before, policy=plain_policy), plain_policy, False)
        if plain.total <= budget.room:
            without.summarized.calls = ctx.summarized.calls
            if ctx.summarized.report is not None:  # (what was asked for, none sent: counted by its reason)
                asked = {k: v for k, v in ctx.summarized.report.items() if k != "summary_tokens"}
                without.summarized.report = {**asked, "source": "none"}
            without.skipped.append(Skipped(SUMMARIZE, "summary_over_room"))
            return plain, without, Carry()
    return conv, ctx, Carry()


def _copied(ctx: Context) -> Context:
    """`ctx` with a ledger and summaries of its own: a fit tried from it leaves it as it was."""
    return replace(ctx, ledger=ctx.ledger.copy(), summarized=ctx.summarized.copy())


def _finished(
    req: Counted,
    budget: Budget,
    conv: Conversation | Unchanged,
    report: Report,
    updates: Mapping[str, Any],
    cut_from: int | None,
) -> Fitted:
    """The body to send, every output limit it carries set to the reserved output; or, when the
    input is still over the room, the context-window error."""
    if not report.fits:
        shortfall = Shortfall(
            report.model,
            report.window_rule,
            report.max_input_tokens,
            conv.total,
            budget.reserved_output,
            budget.margin,
            trimmed=conv.total < req.before,
            fixed_tokens=conv.fixed,
        )
        raise ContextWindowExceeded(shortfall, report)
    out = dict(req.body)
    if conv.messages != req.messages:
        out = req.dialect.with_messages(req.body, conv.messages)
        if isinstance(conv, Conversation):
            report.cut_from = cut_from
    out[req.key] = budget.reserved_output
    reasoning.apply(out, updates)
    for other in OUTPUT_KEYS:  # every output limit the body carries says the same: the reserved one
        if other != req.key and out.get(other) is not None:
            out[other] = budget.reserved_output
    return Fitted(out, report)


def _clamp_output(budget: Budget, total: int, policy: Policy, ctx: Context, reasoning_floor: int = 0) -> Budget:
    """Lower the reserved output toward the policy floor (shared windows only, if allowed), never
    below what the body's thinking budget needs to stay valid."""
    floor = policy.min_output_tokens
    if floor is not None:
        floor = max(floor, reasoning_floor)
    if not policy.allows(CLAMP) or floor is None or budget.limits.rule != "shared" or budget.reserved_output <= floor:
        return budget
    needed = budget.limits.max_input_tokens - budget.margin - total  # output that would fit as is
    new = max(floor, min(budget.reserved_output, needed))
    ctx.record(CLAMP, budget.reserved_output - new, 1)
    return budget.with_output(new)


def run(p: Plan, summarize: Callable[[SummaryRequest], str | None] | None = None) -> Fitted:
    """Drive a plan synchronously; a failing summarizer counts as no summary, and there is no
    cache to look in."""
    try:
        request = next(p)
        while True:
            answer: Any = None
            if isinstance(request, CachedSummaries):  # (a `WithheldSummary` too: no cache to keep it in)
                answer = (None,) * len(request.requests)
            elif summarize is not None:
                try:
                    answer = summarize(request)
                except Exception:  # the deterministic path must go on
                    answer = None
            request = p.send(answer)
    except StopIteration as stop:
        return cast("Fitted", stop.value)


__all__ = [
    "SUMMARY_MARK",
    "CachedSummaries",
    "Fitted",
    "Plan",
    "SummaryAnswer",
    "SummaryRequest",
    "WithheldSummary",
    "plan",
    "run",
]
