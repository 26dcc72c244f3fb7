"""A carried cut's prefix fitted to its mark (`guard.fit.carried`): the first messages of a request's
history cut once, to a mark the replay chose, and then sent byte for byte on every turn the cut is
carried. The words (mark, room bar): docs/glossary.md."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from guard.core.budget import Budget
from guard.core.content import other_parts
from guard.core.policy import Policy
from guard.core.steps import BY_NAME, StrategyName
from guard.dialects import Dialect
from guard.fit.conversation import Context, Conversation, Keeping
from guard.fit.marks import Marks
from guard.fit.questions import history_of
from guard.fit.replay import room_bar
from guard.fit.rounds import fit
from guard.fit.strategies.drop import standing_marker


class PrefixCuts(Protocol):
    """What a prefix fit needs of a request's cuts (`guard.fit.carried._Cuts`)."""

    dialect: Dialect
    messages: tuple[Mapping[str, Any], ...]
    counts: tuple[int, ...]
    fixed: int
    budget: Budget
    policy: Policy
    ctx: Context
    summarizing: bool
    known: dict[int, tuple[str, str]]
    ghost: int
    dropped: frozenset[int]
    dropped_ghost: int
    slid: tuple[int, int]


def fit_prefix(
    cuts: PrefixCuts, m: int, mark: int, question: str | None, summaries: bool = False, *, no_room: bool = False
) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """The first `m` messages of `cuts`' history fitted to `mark`, their lossy steps ranking by
    `question`; with `summaries`, summarized as any request is (its spans, and so its cached summary, stay the
    same all band). The summaries earlier prefixes of this request got (`known`, by span: a
    prefix's spans step in quarter bands from its oldest droppable turn, so span k is the same
    for every prefix of the request that has it) are reused instead of asked for again, and
    the request's summary calls are counted across tries. The last resort (cutting inside the
    newest turns) is for the request, not for its prefix, but where the prefix's newest turns
    alone leave no room for a cut (`no_room`: `guard.fit.carried._no_room`) and dropping older
    turns alone does not fit the room: elsewhere a prefix that needs it cannot be carried, and
    the request is fitted whole instead.

    Where truncating old results takes the prefix under the room bar (each result cut to a rung
    of its ladder, so that every turn cuts it alike, overshoots the mark by up to a rung; 24
    results, three of 170k tokens, in a 557k room overshot it by 27k), the prefix is fitted
    again without that step, and the whole-turn drop is kept where it lands between the bar and
    the mark: a cut that keeps the bar lasts, where the replay (`guard.fit.replay.choose_mark`)
    would go up to a mark whose truncation keeps it and re-cut sooner (bench.sweep:
    `deerflow/3823e443` at 50% 0.829 -> 0.711, one cut fewer; `moatless/django__django-12284` at
    70% 1.068 -> 0.929; a held-out Cursor chat at 70% 1.781 -> 1.086, one cut fewer). Not where
    the prefix's tool results hold media: a screenshot truncated to a line saying it went loses
    little, and the steps around it stay (a computer-use agent's old screenshots go, not its
    steps)."""
    budget = cuts.budget
    # (a prefix fitted without summaries, the summarizer's or not, reports no summarize step:
    # with a summarizer, its summary is put in afterwards, see `guard.fit.cut_summaries.summarized`)
    steps = [s for s in cuts.policy.strategies if summaries or not cuts.summarizing or s != "summarize"]
    marks = Marks(
        stop_at=mark,
        floor=mark - budget.band,
        target=budget.target,
        room=min(budget.room, mark),
        band=budget.band,
        ceiling=mark,
        # (a cut whose dropped messages the client has all taken out since: it compacted its prefix)
        every_overflow=mark >= budget.room or (cuts.slid[0] > 0 and not cuts.dropped),
        least=room_bar(budget),
    )
    used = [s for s in steps if BY_NAME[s].kind != "newest"]  # (`no_room` allows a marker: a drop may fit)
    cut, part = yield from _fit_steps(cuts, m, marks, used, question, summaries)
    if no_room and cut.total > budget.room:
        used = steps
        cut, part = yield from _fit_steps(cuts, m, marks, used, question, summaries)
    if (
        cut.total < marks.least
        and any(a.kind == "truncate_tool_results" for a in part.actions)
        and not _has_media(cuts.dialect, cuts.messages[:m])
    ):
        whole = [s for s in used if s != "truncate_tool_results"]
        dropped, by_turns = yield from _fit_steps(cuts, m, marks, whole, question, summaries)
        if marks.least <= dropped.total <= mark:
            cut, part = dropped, by_turns
    return cut, part


def _fit_steps(
    cuts: PrefixCuts, m: int, marks: Marks, steps: Sequence[StrategyName], question: str | None, summaries: bool
) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """The first `m` messages of `cuts`' history fitted to `marks` with the policy's `steps`; the
    summaries it asked for are the request's (counted, and known to its later tries)."""
    dialect, messages, counts, ctx = cuts.dialect, cuts.messages[:m], cuts.counts[:m], cuts.ctx
    policy = cuts.policy
    if list(steps) != policy.strategies:
        policy = policy.model_copy(update={"strategies": list(steps)})
    part = Context(counter=ctx.counter, policy=policy, marks=marks)
    part.history = history_of(dialect, messages, counts, policy.relevance == "bm25", question)
    ghost, slid, at = (cuts.dropped_ghost if cuts.dropped else 0), *cuts.slid
    # (slid with nothing to drop: the client took the cut's dropped messages out whole)
    edited = bool(cuts.dropped) or slid > 0
    if edited:
        part.history = replace(part.history, dropped=cuts.dropped, dropped_ghost=cuts.dropped_ghost, slid=cuts.slid)
    for action in ctx.actions:  # the output clamp of this request
        part.record(action.kind, action.tokens_saved, action.items)
    part.summarized.known = cuts.known
    part.summarized.calls = ctx.summarized.calls
    # what the client took out of the messages a cut dropped stands in its fixed tokens until they go
    # (not in what the newest turns kept whole are measured against: those messages were not fixed)
    fixed = cuts.fixed + cuts.ghost + (0 if slid else ghost)
    keeping = Keeping.of(policy, cuts.budget)
    if edited:  # the task is before the cut's first run, where the client slid it (`Keeping.task_before`)
        keeping = replace(keeping, task_before=at if slid else min(cuts.dropped))
    prefix = Conversation.build(dialect, messages, counts, fixed, keeping)
    prefix = replace(prefix, fixed=prefix.fixed + ghost) if slid else prefix
    if slid and at not in cuts.dropped:  # the client took the cut's first run out whole: its marker stays
        prefix = standing_marker(prefix, ctx.counter, at, slid)
    cut, part = yield from fit(prefix, part, policy, can_summarize=summaries)
    ctx.summarized.calls = part.summarized.calls
    cuts.known.update(part.summarized.known)  # (the trial the summaries were found in held a copy)
    return cut, part


def _has_media(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any tool result of `messages` holds a part that is no text (an image, a document)."""
    return any(other_parts(content) for msg in messages for _, content in dialect.tool_results(msg))


def followed_by(cut: Conversation, tail: Sequence[Mapping[str, Any]], counts: Sequence[int], m: int) -> Conversation:
    """The cut of a history's first `m` messages followed by the messages after them (`tail`, each
    `counts` tokens), as sent: the newest turns, in no group a step may cut."""
    rest = len(tail)
    return replace(
        cut,
        messages=cut.messages + tuple(tail),
        counts=cut.counts + tuple(counts),
        groups=cut.groups + (-1,) * rest,
        pinned=cut.pinned + (False,) * rest,
        recent=cut.recent + (True,) * rest,
        pending=cut.pending + (None,) * rest,
        origin=cut.origin + tuple(range(m, m + rest)),
    )


def kept_whole(
    dialect: Dialect, messages: Sequence[Mapping[str, Any]], sent: Sequence[int], fixed: int, keeping: Keeping
) -> int:
    """Tokens of `messages` (each `sent` tokens) that no step but the last resort cuts: pinned ones
    and the newest turns."""
    built = Conversation.build(dialect, messages, sent, fixed, keeping)
    return sum(n for n, pinned, recent in zip(sent, built.pinned, built.recent) if pinned or recent)
