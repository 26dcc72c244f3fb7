"""What a fit reports: the breakdown of the input, the fingerprint of a cut, and the report itself,
assembled in one place (`build_report`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guard.core.budget import Budget
from guard.core.content import compact_json
from guard.core.reasoning import ReasoningChange
from guard.core.report import Report
from guard.dialects import Dialect
from guard.fit.conversation import Context, Conversation
from guard.fit.edited import LastCut
from guard.fit.notes import NOTE_ORIGIN
from guard.fit.request import Counted, Resolved
from guard.fit.strategies.compact import compacted
from guard.fit.temperature import Anchor, Temperature


@dataclass(frozen=True)
class Unchanged:
    """The fast path's stand-in for a Conversation: a request that fits needs no grouping."""

    dialect: Dialect
    messages: tuple[Mapping[str, Any], ...]
    counts: tuple[int, ...]
    fixed: int

    @property
    def total(self) -> int:
        return self.fixed + sum(self.counts)


def breakdown(conv: Conversation | Unchanged, system_fixed: int) -> dict[str, int]:
    """The input by part: system prompt (in the turns, and `system_fixed` outside them), history,
    tool results, and the rest (tool schemas and framing)."""
    system, tool_results, history = system_fixed, 0, 0
    for msg, n in zip(conv.messages, conv.counts):
        if conv.dialect.is_system(msg):
            system += n
        elif conv.dialect.tool_results(msg) and not conv.dialect.is_user_turn(msg):
            tool_results += n
        else:
            history += n
    return {
        "system": system,
        "history": history,
        "tool_results": tool_results,
        "tools_and_framing": conv.total - system - history - tool_results,
    }


def cut_fingerprint(dialect: Dialect, originals: tuple[Mapping[str, Any], ...], conv: Conversation) -> str:
    """The fingerprint of a cut (see Report.cut): the messages dropped, and every message edited
    or inserted with its hash, in order. A message whose only edit is compact JSON is left out:
    that rewrite is a pure function of the message, applied to all of them once a conversation is
    over its room (which every cut conversation is), so new JSON results would otherwise change
    the fingerprint while the prompt still starts with the previous one; so is a note
    (`guard.fit.notes`), which goes after the carried prefix."""
    edits: list[Any] = []
    for msg, origin in zip(conv.messages, conv.origin):
        if origin == NOTE_ORIGIN:  # after the carried prefix, where the cache has not been
            continue
        if origin < 0:
            edits.append(["inserted", sha256(msg)])
            continue
        original = originals[origin]
        if msg is original or msg == original or msg == compacted(dialect, original):
            continue
        edits.append([origin, sha256(msg)])
    kept = set(conv.origin)
    dropped = [i for i in range(len(originals)) if i not in kept]
    return sha256(["over-room", dropped, edits])[:16]


def sha256(value: Any) -> str:
    data = compact_json(value)  # key order is kept
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Fit:
    """What a fit came to, for its report: the budget it fitted to, its context (what each step
    did), the conversation it sends, where its output limit came from, the cache temperature it
    was judged at and the anchor of its cut, and what it changed of the body's reasoning."""

    budget: Budget
    ctx: Context
    conv: Conversation | Unchanged
    source: str
    temperature: Temperature | None = None
    anchor: Anchor | None = None
    thinking: list[ReasoningChange] = field(default_factory=list)
    last: LastCut | None = None  # the cut carried, as the conversation's record keeps it


def build_report(req: Counted, resolved: Resolved, fit: Fit) -> Report:
    """The report of one fit of the request: the limits, the budget, the counts before and after,
    what each step did and what it skipped, the cache temperature, and the outcome (fitted,
    unchanged or, when the input is still over the room, rejected)."""
    dialect, limits, sent = req.dialect, resolved.limits, req.messages
    budget, ctx, conv, temperature, anchor = fit.budget, fit.ctx, fit.conv, fit.temperature, fit.anchor
    calibration = resolved.calibration
    changed = conv.messages != sent
    idle = None if temperature is None or temperature.idle_seconds is None else round(temperature.idle_seconds, 3)
    # (`Budget.fits`, on the budget's own sizes; a cut counted with another factor: `Resolved.checked_room`)
    fits = conv.total <= resolved.checked_room(budget.room, len(req.messages))
    report = Report(
        model=limits.model,
        dialect=dialect.name,
        window_rule=limits.rule,
        context_window=limits.context_window,
        max_input_tokens=limits.max_input_tokens,
        max_output_tokens=limits.max_output_tokens,
        limits_source=limits.source,
        input_tokens_before=req.before,
        input_tokens_after=conv.total,
        max_tokens=budget.reserved_output,
        max_tokens_requested=req.requested,
        max_tokens_source=fit.source,
        output_key=req.key,
        safety_margin_tokens=budget.margin,
        room=budget.room,
        target=budget.target,
        fits=fits,
        outcome="fitted" if changed or ctx.actions else "unchanged",
        exact_count=resolved.exact,
        calibration_factor=ctx.counter.factor,
        calibration_key=calibration[0] if calibration else None,
        calibration_source=calibration[1] if calibration else "static",
        messages_before=len(sent),
        messages_after=len(conv.messages),
        actions=ctx.actions,
        skipped=ctx.skipped,
        breakdown=breakdown(conv, req.system_fixed),
        summary=ctx.summarized.report,
        reasoning=[c.to_dict() for c in fit.thinking],
        unseen_state=list(req.unseen),
        cache_temperature=temperature.state if temperature is not None else None,
        idle_seconds=idle,
        anchor=anchor.to_dict() if anchor is not None else None,
        carried=fit.last.to_dict() if fit.last is not None else None,
        note=ctx.note,
    )
    if not fits:
        report.outcome = "rejected"
        report.reason = "no allowed strategy brings the input within the room"
    elif changed:
        report.fitted_messages_sha256 = sha256(list(conv.messages))
        if isinstance(conv, Conversation):
            report.cut = cut_fingerprint(dialect, sent, conv)
    return report
