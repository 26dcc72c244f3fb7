"""Carried cuts with a summarizer: a cut that drops messages is made to leave room for a summary
of them, and the summary goes in the place of the drop's last marker (its other markers go).

A new cut asks for one summary: of exactly the messages it drops. Every later turn that carries
the cut drops the same messages, so it finds the same summary in the summary cache (the span's
cache key is its transcript) and sends the same bytes. The replay (`guard.fit.replay.last_cut`)
chooses a cut's mark on its size with the summary's whole budget in place (a pure function of the
history: every worker and replica chooses the same), and carries the cut with the summary its
request sent, found in the cache, so a cut is kept for exactly as long as what is sent fits.
The words: docs/glossary.md."""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import replace
from typing import Any, Literal, Protocol, TypeAlias

from guard.core.report import Skipped
from guard.dialects import cache_breakpoint
from guard.fit import summary
from guard.fit.conversation import Context, Conversation
from guard.fit.prefix_fit import PrefixCuts
from guard.fit.replay import head_length, room_bar
from guard.fit.slid import HeldSummary
from guard.fit.spans import (
    MIN_SUMMARY,
    SUMMARY_MARK,
    WITHHELD,
    CachedSummaries,
    SummaryAnswer,
    SummaryRequest,
    WithheldSummary,
    summary_budget,
    withheld_request,
)

# what a summary's text may count in this request's tokens against the summarizer's own
TOKENIZER_SLACK = 1.25

Made: TypeAlias = "tuple[Conversation, Context, int] | None"  # a cut carried to a request, its prefix length
Summary: TypeAlias = Literal["put", "withheld", "missing"]  # what became of a cut's summary (`summarized`)


class Cuts(PrefixCuts, Protocol):
    """What `CutSummaries` needs of a request's cuts (`guard.fit.carried`): a prefix fit's, and more."""

    sent: list[int]
    room: int  # the request's room, which a cut carried to it must fit (`budget`: the cut's)
    held: HeldSummary  # a carried cut the client slid (`slid`): the summary its record's turn sent

    def size(self, m: int, mark: int) -> Generator[Any, Any, int | None]: ...

    def at(
        self, m: int, mark: int, end: int | None = None, summaries: bool = False, over: int = 0
    ) -> Generator[Any, Any, Made]: ...

    def made(self, m: int, mark: int, over: int = 0) -> Generator[Any, Any, Made]: ...


class CutSummaries:
    """The cuts of one request's history, each with the summary of what it drops where the room
    allows one: `size` and `carry_size` for the replay, `made` for the request."""

    def __init__(self, cuts: Cuts) -> None:
        self.cuts = cuts
        budget, dialect = cuts.budget, cuts.dialect
        frame = dialect.marker(SUMMARY_MARK.format(m=10**6, n=10**9))  # (+8: a text merging with it)
        self.framing = cuts.ctx.counter.message(dialect, frame) + 8
        # a summary's room holds its budget a quarter over (the summarizer counts with its own
        # tokenizer), at most a quarter band (the cut it lets go deeper still lasts about a band)
        # and a share of what the pinned messages leave (`room_cap`)
        self.slack = cuts.ctx.counter.factor * TOKENIZER_SLACK
        self.wanted = summary_budget(cuts.policy.summary_max_tokens, budget.room)
        self.room = self._room(min(math.ceil(self.wanted * self.slack) + self.framing, room_cap(cuts)))
        self._plans: dict[tuple[Any, ...], tuple[int, int, str | None]] = {}
        # cuts under the room bar with the shortest summary: what they keep without their markers
        self._short: dict[tuple[int, int], int] = {}

    def _room(self, room: int) -> int:
        """`room` if a summary of at least `MIN_SUMMARY` tokens fits it, else 0."""
        return room if self.tokens(room) >= MIN_SUMMARY else 0

    def tokens(self, room: int) -> int:
        """The output budget of a summary given `room` tokens in the request."""
        return min(self.wanted, math.floor((room - self.framing) / self.slack))

    def made(self, m: int, mark: int) -> Generator[Any, Any, Made]:
        """The cut of the first `m` messages to `mark`, carried to the request: where it drops
        messages and the room allows, with the summary of them put in (asked for where the summary
        cache lacks it and does not remember the cut going without it; see `_plan`); else as
        without a summarizer, the report saying why there is no summary."""
        # a cut the client slid: first as its record's turn made it (`HeldSummary`: the history it
        # was planned on is not all here, and what is may plan otherwise), then as planned here
        held = self.cuts.held
        as_made = self.cuts.slid[0] and held.mark
        for plan in ((held.mark, held.room, None if held.room else "summary_withheld"), None) if as_made else (None,):
            plain, room, withheld = plan or (yield from self._plan(m, mark))
            made = yield from self.cuts.made(m, plain, over=room)  # (the summary replaces markers)
            if made is not None:
                break
        if made is None:
            return None
        if room:
            made = (yield from summarized(self.cuts, made, (m, mark), room, self.tokens(room), ask=True))[0]
        elif withheld:
            made[1].skipped.append(Skipped("summarize", withheld))
        if made is None or made[0].total > self.cuts.room:
            return None
        made[1].summarized.plan = (plain, room)  # (for the record: `LastCut.summary_mark`)
        return made

    def size(self, m: int, mark: int) -> Generator[Any, Any, int | None]:
        """The tokens the replay chooses a mark by: the cut without its summary and the room it
        leaves its summary (see `_plan`); a cut that would keep less than the room bar with the
        shortest summary, its tokens with that summary in its markers' place (so a mark whose cut
        keeps the bar is chosen where there is one). A pure function of the history."""
        plain, room, _ = yield from self._plan(m, mark)
        size = yield from self.cuts.size(m, plain)
        if size is None:
            return None
        if (m, mark) in self._short:
            # judged as sent with the shortest summary, which takes the place of its markers (a
            # drop in many runs leaves many: with them counted, a cut that sent 0.585 of the room
            # was judged over the bar)
            return self._short[m, mark] + self.framing + MIN_SUMMARY
        return size + room

    def carry_size(self, m: int, mark: int) -> Generator[Any, Any, int | None]:
        """The tokens the replay carries a past cut with, as its request sent it: with the summary
        where the summary cache holds it (the request that made the cut asked for it), without
        where the cache remembers that this cut went without it (`WithheldSummary`, session 52:
        the worker that served the turn carries it so from its record), else with the summary's
        whole room (a past request this guard never saw, or a summary lost), also where the cache
        holds a text for its messages that does not go in: whether it does depends on whether a
        later cut asked for the same messages, and sized as sent it moved the crossings once it
        did (session 44; what a cut remembers is its own, by its prefix and mark)."""
        plain, room, _ = yield from self._plan(m, mark)
        base = yield from self.cuts.size(m, plain)
        if base is None or not room:
            return base
        made = yield from self.cuts.at(m, plain, end=m)
        with_it, summary = yield from summarized(self.cuts, made, (m, mark), room, self.tokens(room), ask=False)
        if summary == "put" and with_it is not None:
            return with_it[0].total
        return base if summary == "withheld" else base + room

    def _plan(self, m: int, mark: int) -> Generator[Any, Any, tuple[int, int, str | None]]:
        """`_planned`, once per request (the replay, the carry and the cut ask alike)."""
        cuts = self.cuts  # (and the edits it is made again with: another record's are another plan)
        key = (m, mark, cuts.ghost, cuts.dropped, cuts.dropped_ghost, cuts.slid)
        if key not in self._plans:
            self._plans[key] = yield from self._planned(m, mark)
        return self._plans[key]

    def _planned(self, m: int, mark: int) -> Generator[Any, Any, tuple[int, int, str | None]]:
        """How the cut of the first `m` messages to `mark` is made: the mark it is made to without
        its summary, the room it leaves the summary (0: none) and, where it drops messages and
        gets no summary, why. A cut that drops messages gets its summary's whole room where it left
        that under the mark (whole turns step coarsely); else where the cut lower by that room
        still keeps the room bar with the shortest summary asked for (`MIN_SUMMARY`: a summary may
        come back far shorter than its room, and what is sent must not fall under the bar then);
        else over the mark, if the room allows; else the room it left under the mark, if a summary
        fits it ("below_room_bar"), or, held up over its mark by its newest turns (it goes no lower),
        under the room ("no_room_for_summary", as with too small a `room_cap`). A pure function."""
        if mark >= self.cuts.budget.room:
            return mark, 0, None
        made = yield from self.cuts.at(m, mark, end=m)
        # (a slid cut drops messages even where the client took all it dropped out: its marker stands)
        if made is None or not (absent(made[0], m) or self.cuts.slid[0]):
            return mark, 0, None
        if not self.room:
            return mark, 0, "no_room_for_summary"
        # (without the drop's markers, which the summary replaces; the bar with the shortest summary
        # asked for: a cut under it gets its summary, its marks chosen as if it had none: `size`)
        kept = made[0].total - sum(markers(made[0]))
        bar = room_bar(self.cuts.budget) - self.framing - MIN_SUMMARY
        if kept < bar:
            self._short[m, mark] = kept
        if mark - kept >= self.room:
            return mark, self.room, None
        lower = yield from self.cuts.at(m, mark - self.room, end=m)
        room = self.cuts.budget.room
        lowered = lower[0].total - sum(markers(lower[0])) if lower is not None else 0
        if lower is not None and bar <= lowered <= room - self.room:  # (one its newest turns hold up: no lower)
            return mark - self.room, self.room, None
        if kept + self.room <= room:  # over the mark: the cut lasts that much less
            return mark, self.room, None
        left = self._room(mark - kept if kept <= mark else min(self.room, room - made[0].total))
        return mark, left, None if left else ("below_room_bar" if kept <= mark else "no_room_for_summary")


def summarized(
    cuts: Cuts, made: Made, at: tuple[int, int], room: int, tokens: int, ask: bool
) -> Generator[Any, Any, tuple[Made, Summary]]:
    """The cut `made` of the first m messages to a mark (`at`, of `cuts`' history) with what it
    dropped summarized in the place of the drop's markers (in at most `room` tokens more, a summary
    of at most `tokens` asked for), and what became of its summary: "put" (from the summary cache,
    or, with `ask`, from the summarizer), "withheld" (the cut went without it, and the summary
    cache remembers so: `WithheldSummary`) or "missing" (not in the cache, and not asked for).
    Without one, the cut as it is, the report saying why. A summary that `ask` finds no way in for
    (no answer, or a text over its room or not shorter) is remembered as withheld for this cut:
    every worker's replay then sizes the cut as it was sent, and the turns that carry it send it
    so without asking again."""
    if made is None:
        return made, "missing"
    conv, part, _ = made
    m, mark = at
    left_out = absent(conv, m)
    if cuts.slid[0]:
        return (yield from _slid_summary(cuts, made, left_out, room, tokens))
    request = dropped_request(cuts, left_out, conv, part, tokens)
    if request is None:
        return made, "missing"
    withheld = withheld_request(request, m, mark)
    cached = yield CachedSummaries((request, withheld))
    found = tuple(cached) if isinstance(cached, (tuple, list)) else ()
    if len(found) > 1 and found[1] is not None:  # (before any text: a cut withheld stays so)
        if ask:  # (the request's own cut: its report says why it has no summary)
            part.skipped.append(Skipped("summarize", "summary_withheld"))
        return (conv, part, m), "withheld"
    answer = SummaryAnswer(found[0] if found else None, source="cache")
    if not (isinstance(answer.text, str) and answer.text.strip()):
        if not ask:
            return made, "missing"
        answer = _answer((yield request))
    ctx = cuts.ctx
    ctx.summarized.calls += answer.calls
    part = replace(part, ledger=part.ledger.copy(), summarized=part.summarized.copy())
    part.summarized.calls = ctx.summarized.calls
    text = answer.text.strip() if isinstance(answer.text, str) else ""
    put = put_in(conv, part, request, (answer.source, text), room, left_out) if text else None
    if isinstance(put, Conversation):
        return (put, part, m), "put"
    part.skipped.append(Skipped("summarize", put or answer.reason or "summary_empty"))
    part.summarized.report = {
        "source": "none",
        "calls": part.summarized.calls,
        "span_messages": len(request.messages),
        "span_tokens": request.span_tokens,
    }
    if not ask:
        return (conv, part, m), "missing"
    yield WithheldSummary((withheld,))
    return (conv, part, m), "withheld"


def _slid_summary(
    cuts: Cuts, made: tuple[Conversation, Context, int], left_out: list[int], room: int, tokens: int
) -> Generator[Any, Any, tuple[Made, Summary]]:
    """`summarized` for a carried cut the client slid (it took out the oldest messages the cut
    left out since, `guard.fit.slid`): the summary the turn of its record sent, in its place as it
    was, found in the summary cache by its span's digest (`LastCut.summary`) and never asked for
    again (the messages it stands for are not all here); the cut as it went where that turn sent
    none ("withheld"), and no cut where the cache lost the summary ("missing": a new cut is made,
    with a summary of the messages as they are)."""
    conv, part, m = made
    held = cuts.held
    if not held.digest:
        part.skipped.append(Skipped("summarize", "summary_withheld"))
        return made, "withheld"
    request = SummaryRequest(
        dialect=cuts.dialect.name,
        messages=tuple(cuts.messages[i] for i in left_out),
        span_tokens=held.tokens,
        max_tokens=held.budget or tokens,  # (as it was asked for: the budget is part of its key)
        span=held.digest,
        span_messages=held.messages,
    )
    cached = yield CachedSummaries((request,))
    text = cached[0] if isinstance(cached, (tuple, list)) and cached else None
    if not isinstance(text, str) or not text.strip() or text == WITHHELD:
        return None, "missing"
    part = replace(part, ledger=part.ledger.copy(), summarized=part.summarized.copy())
    put = put_in(conv, part, request, ("cache", text.strip()), room, left_out)
    return ((put, part, m), "put") if isinstance(put, Conversation) else (None, "missing")


def room_cap(cuts: Cuts) -> int:
    """The most room a summary of `cuts`' history may take: a quarter band, and the policy's
    `summary_room_ratio` of the room its pinned messages leave. In a small room, or one a long
    pinned prompt mostly fills, a summary's tokens make every cut that carries it last fewer turns
    (bench.sweep --summarize, 66 loops and 39 held-out at 30/50/70%: mean bill over
    0.644/0.816/0.979 -> 0.638/0.808/0.977 with a 16th, no summarizer 0.632/0.806/0.973;
    held-out 0.723/0.839/0.967 -> 0.704/0.834/0.964; a summary on 1,413 of the 1,974 cut turns
    at 50%, 1,480 before. A 24th: 0.634/0.807/0.973 and held-out 0.699/0.828/0.957, but a
    32k-window model's summary would get less than the policy's 1,024 tokens; with a 16th, a
    summary of 1,024 keeps its room where the pinned messages leave 21k tokens or more, 26k where
    counts are scaled by 1.25)."""
    budget = cuts.budget
    pinned = cuts.fixed + sum(cuts.counts[: head_length(cuts.dialect, cuts.messages)])
    return min(budget.band // 4, math.floor(max(0, budget.room - pinned) * cuts.policy.summary_room_ratio))


def put_in(
    conv: Conversation,
    part: Context,
    request: SummaryRequest,
    answer: tuple[str, str],
    room: int,
    span: list[int],
) -> Conversation | str:
    """`conv` with the summary (`answer`: its source and text; of the messages at `span`) in
    the place of the drop's last marker (the others removed), at most `room` tokens more; the
    drop's tokens and items moved onto the summary in the report (`part`). Or why it cannot go in."""
    source, text = answer
    dialect = conv.dialect
    at = [i for i, o in enumerate(conv.origin) if o < 0]
    replaced = sum(markers(conv))
    # a prompt-cache breakpoint the drop moved onto a marker moves onto the summary
    breakpoints = [bp for i in at if (bp := cache_breakpoint(conv.messages[i])) is not None]
    msg = dialect.marker(
        SUMMARY_MARK.format(m=request.size, n=request.span_tokens) + text,
        breakpoints[-1] if breakpoints else None,
    )
    count = part.counter.message(dialect, msg)
    # (a slid cut's drop may be of none of the messages here: the client took them all out)
    drop = next((a for a in part.actions if a.kind == "drop_oldest_turns"), None)
    dropped, items = (drop.tokens_saved, drop.items) if drop is not None else (0, 0)
    if count - replaced > room:
        return "summary_oversized"
    if count >= dropped + replaced and not request.span:  # (a slid span's was shorter: it went)
        return "summary_not_shorter"
    if drop is not None:
        part.adjust("drop_oldest_turns", -dropped, -items)
    # (a slid span's summary may stand for more than this request holds: it saves none here, and
    # takes the place of at least its marker)
    part.record("summarize", max(0, dropped + replaced - count), items or 1)
    part.summarized.message, part.summarized.span = msg, span
    part.summarized.request = request
    part.summarized.report = {
        "source": source,
        "calls": part.summarized.calls,
        "span_messages": request.size,
        "span_tokens": request.span_tokens,
        "summary_tokens": count,
    }
    # in the place of the last: a cut that keeps older messages between the runs it drops (by
    # relevance) keeps them in place, so a new cut that drops the same first runs sends the same
    # bytes up to its summary (a summary in the first marker's place would break the provider's
    # cache right after the pinned messages on every new cut)
    return conv.replacing(set(at), {at[-1]: (msg, count)})


def dropped_request(
    cuts: Cuts, left_out: list[int], conv: Conversation, part: Context, tokens: int
) -> SummaryRequest | None:
    """The request for a summary (of `tokens` at most) of the messages of `cuts`' history at
    `left_out`, which the cut `conv` dropped; None where it dropped nothing, or not by the drop
    alone (nothing a summary can stand for)."""
    drop = next((a for a in part.actions if a.kind == "drop_oldest_turns"), None)
    if not left_out or not markers(conv) or drop is None or drop.items != len(left_out):
        return None
    messages = [cuts.messages[i] for i in left_out]
    return SummaryRequest(
        dialect=cuts.dialect.name,
        messages=tuple(messages),
        span_tokens=sum(cuts.counts[i] for i in left_out),
        max_tokens=tokens,
        lines=tuple(summary.transcript(cuts.dialect, messages)),
    )


def _answer(answer: Any) -> SummaryAnswer:
    """A driver's answer to a summary request (a `SummaryAnswer`, or a plain text or None)."""
    if isinstance(answer, SummaryAnswer):
        return answer
    return SummaryAnswer(answer if isinstance(answer, str) else None, None if isinstance(answer, str) else "no_summary")


def absent(cut: Conversation, m: int) -> list[int]:
    """The first `m` messages of the history that `cut` left out."""
    kept = set(cut.origin)
    return [i for i in range(m) if i not in kept]


def markers(cut: Conversation) -> list[int]:
    """The tokens of each marker in `cut` (messages of the guard's own)."""
    return [n for n, o in zip(cut.counts, cut.origin) if o < 0]
