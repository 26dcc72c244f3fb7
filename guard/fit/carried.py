"""Carried cuts: a cut made on a prefix of a conversation, applied to every later turn while it
still fits, so a provider's cached prefix keeps hitting (see `carried`; where the cut was made:
`guard.fit.replay`). The words: docs/glossary.md."""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from guard.core import memo
from guard.core.budget import Budget, quantized_stop
from guard.core.policy import Policy
from guard.core.steps import BY_NAME
from guard.core.tokens import message_hash
from guard.dialects import Dialect
from guard.fit import summary
from guard.fit.conversation import Context, Conversation, recent_room
from guard.fit.history import History
from guard.fit.marks import Marks
from guard.fit.questions import cuts_into, query, questions, relevant_origins
from guard.fit.replay import crossing, cumulative, head_length, last_cut, new_cut, room_bar, turn_starts
from guard.fit.rounds import fit
from guard.fit.strategies.compact import compacted
from guard.fit.temperature import Anchor, Temperature


def carried(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], fixed: int,
    budget: Budget, policy: Policy, ctx: Context, temperature: Temperature | None = None, summarizing: bool = False,
) -> Generator[Any, Any, tuple[Conversation, Context, int, Anchor | None] | None]:
    """The cut this request carries, kept byte for byte while it fits.

    Agents resend their history, so a cut made on a prefix of it can be applied to every later
    turn: the prefix is fitted as if it were the request and the messages after it go as sent
    (JSON compacted, as on every overflow). Where that cut was made comes from replaying the
    history's past turn boundaries (`guard.fit.replay.last_cut`): a cut is kept for as long as it
    plus what was added since fits the room, and only then is a new one made, down to a low-water
    mark deep enough to last (the bottom of the band below the room, never under the room bar
    where a turn boundary allows). The replay is a pure function of the history, so every worker
    and replica makes the same cut and a provider's cached prefix keeps hitting.

    A conversation whose provider cache is known to be cold is cut below the band instead and the
    cut anchored (see `guard.fit.temperature`); with a summarizer, the band grid of earlier
    releases stays (`_band_cut`: a past cut's size would need the summaries that request got).
    None when no carried cut fits (the request is then fitted whole)."""
    # the history is replayed on the messages as they go once the request is over its room, JSON
    # compacted where that saves tokens, counted exactly (each form's count is memoized, so a turn
    # counts its new messages' forms only). Pure functions of each message: the same on every turn.
    forms = [compacted(dialect, msg) for msg in messages] if policy.allows("compact_json") else list(messages)
    sent = _sent(dialect, messages, counts, forms, ctx)
    known: dict[int, tuple[str, str]] = {}  # summaries the prefixes tried here got, by span (see `_fit_prefix`)
    cut_at = functools.partial(
        _carried_at, dialect, messages, counts, forms, sent, fixed, budget, policy, ctx, summarizing=summarizing,
        known=known,
    )
    anchor = temperature.anchor if temperature is not None else None
    if anchor is not None and (anchor.length > len(messages) or sum(counts[: anchor.length]) != anchor.prefix_tokens):
        anchor = None  # not this history's prefix (another conversation with the same task, or edited)
    if temperature is not None and temperature.state == "warm" and anchor is not None:
        # the anchor's cut, carried while it fits the room (the cached prefix holds)
        held = yield from cut_at(anchor.length, anchor.mark)
        if held is not None and held[0].total <= budget.room:
            return (*held, anchor)
    if temperature is not None and (temperature.state == "cold" or anchor is not None):
        return (yield from _anchored(cut_at, len(messages), fixed + sum(sent), sum(counts), budget, temperature.state))
    if summarizing:
        made = yield from _band_cut(cut_at, dialect, messages, sent, fixed, budget)
        return None if made is None else (*made, None)
    made_here: dict[int, tuple[Conversation, Context, int] | None] = {}  # cuts of the request itself, by mark
    keys = _SizeKeys(dialect, messages, fixed, budget, policy, summarizing)
    sized = functools.partial(_cut_size, dialect, messages, counts, forms, sent, fixed, budget, policy, ctx,
                              summarizing, known, made_here, keys)
    found = yield from last_cut(dialect, messages, counts, sent, fixed, budget, sized)
    if found is None:
        return None
    m, mark = found
    if m == len(messages) and mark in made_here:
        made = made_here.pop(mark)
    else:
        made = yield from cut_at(m, mark)
    if made is None and m < len(messages):
        # the carried cut does not fit after all (a question asked since moved it): a new cut now
        m, starts, first = len(messages), turn_starts(dialect, messages), head_length(dialect, messages)
        mark = (yield from new_cut(cumulative(sent), starts, first, fixed, m, budget, sized))[0]
        made = made_here.pop(mark, None)
    return None if made is None else (*made, None)


CutAt = Callable[[int, int], Generator[Any, Any, "tuple[Conversation, Context, int] | None"]]


def _anchored(
    cut_at: CutAt, n: int, total: int, prefix_tokens: int, budget: Budget, state: str
) -> Generator[Any, Any, tuple[Conversation, Context, int, Anchor | None] | None]:
    """A cold cache (nothing to break): the whole request cut below the band, halfway to the room
    bar, so the cut lasts longer than a band; an anchor that no longer fits: to the bottom of the
    band. Where whole turns land under the bar there, at the next mark up; where none fits, the
    first that does. The cut is anchored (remembered by the shell) for the turns after it."""
    bar = room_bar(budget)
    marks = ((bar + budget.floor) // 2, budget.floor) if state == "cold" else (budget.floor,)
    first = None
    for mark in dict.fromkeys((*marks, quantized_stop(total, budget.target, budget.band))):
        made = yield from cut_at(n, mark)
        if made is not None and (made[0].total >= bar or first is None):
            first = (*made, Anchor(n, mark, prefix_tokens))
            if made[0].total >= bar:
                break
    return first


def _band_cut(
    cut_at: CutAt, dialect: Dialect, messages: tuple[Mapping[str, Any], ...], sent: Sequence[int], fixed: int,
    budget: Budget,
) -> Generator[Any, Any, tuple[Conversation, Context, int] | None]:
    """With a summarizer: the cut of the prefix up to where the conversation last crossed its band
    (`guard.fit.replay.crossing`), to its tokens minus the whole request's bands (not deeper: its
    spans and the summary's budget step coarsely)."""
    total = fixed + sum(sent)
    m = crossing(dialect, messages, tuple(sent), fixed, budget.target, budget.band)
    # (the whole request's bands: what `quantized_stop` takes off it)
    return (yield from cut_at(m, fixed + sum(sent[:m]) - (total - quantized_stop(total, budget.target, budget.band))))


class _SizeKeys:
    """What the cut of a prefix of this request's history down to a mark depends on: the prefix's
    content, the request's fixed tokens and budget, the policy and whether it summarizes. Each
    message's hash and the policy's JSON are worked out once per request, on first use."""

    def __init__(self, dialect: Dialect, messages: Sequence[Mapping[str, Any]], fixed: int, budget: Budget,
                 policy: Policy, summarizing: bool) -> None:
        self.dialect, self.messages = dialect, messages
        self.rest = (fixed, budget.room, budget.band, summarizing)
        self.policy = policy
        self._hashes: list[int] | None = None
        self._policy: str | None = None

    def __call__(self, m: int, mark: int) -> tuple[Any, ...]:
        if self._hashes is None or self._policy is None:
            self._hashes = [message_hash(self.dialect.name, msg) for msg in self.messages]
            self._policy = self.policy.model_dump_json()
        return (hash(tuple(self._hashes[:m])), m, mark, *self.rest, self._policy)


def _cut_size(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], forms: list[Mapping[str, Any]],
    sent: list[int], fixed: int, budget: Budget, policy: Policy, ctx: Context, summarizing: bool,
    known: dict[int, tuple[str, str]], made_here: dict[int, tuple[Conversation, Context, int] | None],
    keys: _SizeKeys, m: int, mark: int,
) -> Generator[Any, Any, int | None]:
    """The tokens of the cut of this history's first `m` messages down to `mark` (None: it cannot
    be made): a past request's cut is made again where the engine does not remember it (a new
    worker or replica; with a summarizer, its summaries come from the summary cache, where that
    request left them); the request's own cut is kept in `made_here` for the caller to send."""
    key = keys(m, mark)
    sizes = memo.current().cut_sizes
    if m < len(messages) and key in sizes:
        return sizes.get(key)
    made = yield from _carried_at(
        dialect, messages[:m], counts[:m], forms[:m], sent[:m], fixed, budget, policy, ctx, m, mark,
        summarizing=summarizing, known=known,
    )
    if m == len(messages):
        made_here[mark] = made
    return sizes.put(key, made[0].total if made is not None else None)


def _sent(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], forms: list[Mapping[str, Any]],
    ctx: Context,
) -> list[int]:
    """Each message's tokens as it goes once the request is over its room: its compacted form's,
    counted exactly, where that is fewer (as `_carried_at` sends what follows a carried prefix)."""
    sent = list(counts)
    changed = [i for i, (form, msg) in enumerate(zip(forms, messages)) if form is not msg]
    for i, n in zip(changed, ctx.counter.messages(dialect, [forms[i] for i in changed])):
        sent[i] = min(sent[i], n)
    return sent


def _carried_at(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], forms: list[Mapping[str, Any]],
    sent: list[int], fixed: int, budget: Budget, policy: Policy, ctx: Context, m: int, mark: int,
    summarizing: bool = False, known: dict[int, tuple[str, str]] | None = None,
) -> Generator[Any, Any, tuple[Conversation, Context, int] | None]:
    """The cut of the first `m` messages down to `mark`, carried to this request (see `carried`).
    `sent`: each message's tokens as it goes over the room (see `_sent`)."""
    if mark <= fixed:
        return None
    # the prefix's pinned and newest turns alone may be over its mark (newest turns that fill most
    # of a small room): then no cut lasts a band, and the prefix is cut as deep as it can go; that
    # cut is carried while the request fits, and the request is fitted whole once it does not
    floor = fixed + _kept_whole(dialect, messages[:m], sent[:m], fixed, policy, budget)
    deepest = floor > mark
    mark = max(mark, floor)
    question = query(dialect, messages[:m])
    cut, part = yield from _fit_prefix(
        dialect, messages[:m], counts[:m], fixed, budget, policy, ctx, mark, question, summarizing, known
    )
    if part.history.relevance is not None:
        # the band's question is the one its prefix ended with; the first question asked since
        # that is about something the cut removed takes its place, once: a later one waits for the
        # next crossing (agents that send each tool's output as a user message ask every turn)
        later = questions(dialect, messages[m:])
        after = [line.split("] ", 1)[-1] for line in summary.transcript(dialect, messages[m:])] if later else []
        for asked in dict.fromkeys(later):
            # (the question itself holds its terms: what else is sent must)
            if asked != question and cuts_into(cut, part, asked, [line for line in after if line != asked]):
                cut, part = yield from _fit_prefix(
                    dialect, messages[:m], counts[:m], fixed, budget, policy, ctx, mark, asked, summarizing, known
                )
                break
    if cut.total > mark and not deepest:
        return None
    # what follows the prefix goes JSON compacted where that saves tokens (`sent`: counted exactly)
    tail, tail_counts = list(messages[m:]), list(sent[m:])
    for j, n in enumerate(tail_counts):
        if n < counts[m + j]:
            part.record("compact_json", counts[m + j] - n, 1)
            tail[j] = forms[m + j]
    rest = len(messages) - m
    conv = replace(
        cut,
        messages=cut.messages + tuple(tail),
        counts=cut.counts + tuple(tail_counts),
        groups=cut.groups + (-1,) * rest,
        pinned=cut.pinned + (False,) * rest,
        recent=cut.recent + (True,) * rest,
        pending=cut.pending + (None,) * rest,
        origin=cut.origin + tuple(range(m, len(messages))),
    )
    if conv.total > budget.room:
        return None
    return conv, part, m


def _kept_whole(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: Sequence[int], fixed: int, policy: Policy,
    budget: Budget,
) -> int:
    """Tokens of the messages no step but the last resort cuts: pinned ones and the newest turns."""
    built = Conversation.build(
        dialect, messages, counts, fixed, policy.keep_recent_groups, policy.keep_first_user_turn,
        recent_room(policy, budget),
    )
    return sum(n for n, pinned, recent in zip(counts, built.pinned, built.recent) if pinned or recent)


def _fit_prefix(
    dialect: Dialect, messages: tuple[Mapping[str, Any], ...], counts: tuple[int, ...], fixed: int,
    budget: Budget, policy: Policy, ctx: Context, mark: int, question: str | None, summarizing: bool = False,
    known: dict[int, tuple[str, str]] | None = None,
) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """The prefix of a carried cut fitted to `mark`, its lossy steps ranking by `question`; with
    `summarizing`, summarized as any request is (its spans, and so its cached summary, stay the
    same all band). `known`: the summaries earlier prefixes of this request got, by span (a
    prefix's spans step in quarter bands from its oldest droppable turn, so span k is the same
    for every prefix of the request that has it): a second try reuses them instead of asking
    again, and the request's summary calls are counted across tries."""
    band = budget.band
    # the last resort (cutting inside the newest turns) is for the request, not for its prefix: a
    # prefix that needs it cannot be carried, and the request is fitted whole instead
    policy = policy.model_copy(
        update={"strategies": [s for s in policy.strategies if BY_NAME[s].kind != "newest"]}
    )
    marks = Marks(
        stop_at=mark, floor=mark - band, target=budget.target, room=min(budget.room, mark), band=band, ceiling=mark,
        every_overflow=mark >= budget.room, least=room_bar(budget),
    )
    part = Context(counter=ctx.counter, policy=policy, marks=marks)
    transcript = functools.cache(functools.partial(summary.transcript, dialect, messages))
    scores = (
        functools.partial(relevant_origins, dialect, messages, transcript, query=question)
        if policy.relevance == "bm25"
        else None
    )
    part.history = History(messages, counts, transcript, scores)
    for action in ctx.actions:  # the output clamp of this request
        part.record(action.kind, action.tokens_saved, action.items)
    if known is not None:
        part.summarized.known = known
    part.summarized.calls = ctx.summarized.calls
    prefix = Conversation.build(
        dialect, messages, counts, fixed, policy.keep_recent_groups, policy.keep_first_user_turn,
        recent_room(policy, budget),
    )
    cut, part = yield from fit(prefix, part, policy, can_summarize=summarizing)
    ctx.summarized.calls = part.summarized.calls
    if known is not None:
        known.update(part.summarized.known)  # (the trial the summaries were found in held a copy)
    return cut, part
