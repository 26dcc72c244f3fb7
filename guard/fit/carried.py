"""Carried cuts: a cut made on a prefix of a conversation, applied to every later turn while it
still fits, so a provider's cached prefix keeps hitting (see `carried`; where the cut was made:
`guard.fit.replay`). The words: docs/glossary.md."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any

from guard.core import memo
from guard.core.budget import Budget, quantized_stop
from guard.core.report import Skipped
from guard.core.steps import of_kind
from guard.fit.conversation import Context, Conversation, Keeping
from guard.fit.cut_summaries import CutSummaries, Made
from guard.fit.edited import LastCut
from guard.fit.notes import Notes
from guard.fit.prefix_fit import fit_prefix, followed_by, kept_whole
from guard.fit.prefix_forms import PrefixKeys, SentForms
from guard.fit.questions import query
from guard.fit.replay import FIRST_MARK_SLACK, Past, last_cut, new_cut, room_bar
from guard.fit.request import Counted
from guard.fit.slid import HeldSummary, recorded, slid_to
from guard.fit.temperature import Anchor, Temperature


def carried(
    req: Counted,
    budget: Budget,
    ctx: Context,
    temperature: Temperature | None = None,
    summarizing: bool = False,
    replay: bool = True,
) -> Generator[Any, Any, Carried | None]:
    """The cut this request carries, kept byte for byte while it fits.

    Agents resend their history, so a cut made on a prefix of it can be applied to every later
    turn: the prefix is fitted as if it were the request and the messages after it go as sent
    (JSON compacted, as on every overflow). Where that cut was made comes from replaying the
    history's past turn boundaries (`guard.fit.replay.last_cut`): a cut is kept for as long as it
    plus what was added since fits the room, and only then is a new one made, down to a low-water
    mark deep enough to last (the bottom of the band below the room, never under the room bar
    where a turn boundary allows); with `last_resort_cuts: recut`, a cut the last resort made
    inside the newest turns (a result larger than the room) only while those turns are the
    newest. The replay is a pure function of the history, so every worker and replica makes the
    same cut and a provider's cached prefix keeps hitting.

    With a summarizer the cuts are the same kind; one that drops messages is made to leave room
    under its mark for a summary of them, which takes the place of their markers: one summary a
    new cut, the same on every turn that carries it (`guard.fit.cut_summaries`). A conversation
    whose provider cache is known to be cold is cut below the band instead and the cut anchored
    (see `guard.fit.temperature`). A history the client changed since its last turn (not only
    appended to) carries the cut that turn sent, from the conversation's record, while it fits
    (`guard.fit.edited`). Without `replay` (a busy worker: `FitRequest.replay`), a request whose
    record of its last turn does not hold is cut as a cold cache's is and the cut anchored, where
    the replay would have fitted a prefix per past crossing. None when no carried cut fits (the
    request is then fitted whole), and at once under a policy with no step that cuts (the rewrites
    it allows give each message one form on every turn over the room: nothing to carry)."""
    if _CUTTING.isdisjoint(ctx.policy.strategies):
        return None
    cuts = _Cuts(req, budget, ctx, summarizing)
    messages, counts, n = req.messages, req.counts, len(req.messages)
    anchor = temperature.anchor if temperature is not None else None
    if anchor is not None and not anchor.of_this(counts):
        anchor = None  # not this history's prefix (another conversation with the same task, or edited)
    notes = Notes(req, budget, ctx, cuts.sent, cuts.cut, cuts.size)
    # a cut made inside turns that are no longer the newest is not carried (`last_cut`): such an
    # anchor goes as one that no longer fits does
    stale = anchor is not None and cuts.aged(anchor.length, n)
    if temperature is not None and temperature.state == "warm" and anchor is not None and not stale:
        # the anchor's cut, carried while it fits the room (the cached prefix holds), made for the
        # room it was made for
        as_made, its_notes, _ = _made_for(req, budget, anchor.room, (cuts, notes, cuts.made))
        held = yield from as_made.at(anchor.length, anchor.mark)
        held = yield from its_notes.noted(held, anchor.length, anchor.mark)
        if held is not None and held[0].total <= (ctx.carry_room or budget.room):
            under, cut = held[0].total < room_bar(as_made.budget), (anchor.length, anchor.mark)
            record = LastCut.of(req.dialect, messages, counts, cut, under, held[0].origin)
            return (*held, anchor, recorded(record.made_for(as_made.budget.room), held))
    if temperature is not None and (temperature.state == "cold" or anchor is not None):
        total = req.fixed + sum(cuts.sent)
        return (yield from _anchored(cuts.summarized_at, req, total, budget, temperature.state))
    records = temperature.records(n) if temperature is not None else ()
    return (yield from _warm(req, budget, cuts, notes, records, replay))


def _warm(
    req: Counted, budget: Budget, cuts: _Cuts, notes: Notes, records: Sequence[LastCut], replay: bool
) -> Generator[Any, Any, Carried | None]:
    """The cut a warm conversation carries: the one its last turn sent (of the conversation's
    `records`, one per rollout of its task, the one of this history) while it fits, its prefix as
    it went less what the client took out since; else the one the replay finds; a new one where the
    client edited the history (its past is not what was sent), where the replay finds a past cut no
    turn sent though the record is of the turn just before (the tools, room or factor the replay
    counts the past with are not those it went with), or none fits."""
    dialect, messages, counts, n = req.dialect, req.messages, req.counts, len(req.messages)
    past = Past(dialect, messages, counts, cuts.sent, req.fixed)
    summaries = CutSummaries(cuts) if cuts.summarizing else None
    size_of, carry_of = (summaries.size, summaries.carry_size) if summaries else (cuts.size, None)
    notes.prefix_size = carry_of or size_of
    made_at = summaries.made if summaries else cuts.made
    edited = False
    # the first record of this history (then earlier cuts a turn this long carried: `records`): of
    # the turn just before, or of a later one the client went back from; or of an older one (another
    # worker served those since) of a history that only grew: its cut, where it fits this request,
    # fitted every request in between too (the replay's own rule). Not a cut made inside turns that
    # are no longer the newest: cut anew (`last_cut`)
    ours = _of_this(req, records)
    sent_last = False  # whether a record of this history is of the turn just before, its cut no longer fitting
    for last in (r for k, r in enumerate(ours) if not k or r.carried_by(n)):
        recent = last.history in (n, *past.requests[-1:]) or last.history > n
        if cuts.aged(last.length, n) or not (recent or _older(last, past, counts)):
            continue
        kept, its_edits = yield from _carry(req, budget, (cuts, notes, made_at), last)
        if kept is not None:
            return kept
        edited = edited or its_edits
        sent_last = sent_last or last.history in past.requests[-1:]
        cuts.ghost, cuts.dropped, cuts.dropped_ghost, cuts.slid, cuts.held = 0, frozenset(), 0, (0, 0), HeldSummary()
    if edited:
        found: tuple[int, int] | None = (n, (yield from new_cut(past, n, budget, size_of))[0])
    elif not replay:  # a busy worker: the cut a cold cache gets, anchored for the turns after it
        total = req.fixed + sum(cuts.sent)
        anchored = yield from _anchored(cuts.summarized_at, req, total, budget, "cold")
        if anchored is not None:
            anchored[1].skipped.append(Skipped("replay", "busy"))
        return anchored
    else:
        found = yield from last_cut(past, budget, size_of, carry_of, notes.tokens, cuts.aged)
        if found is not None and found[0] < n and sent_last and all((r.length, r.mark) != found for r in ours):
            # a past cut no turn sent (the replay counts the past under today's tools, room, factor):
            # no cached prefix, and carried this far it would not last; a new cut
            found = (n, (yield from new_cut(past, n, budget, size_of))[0])
    if found is None:
        return None
    m, mark = found
    made = yield from made_at(m, mark)
    made = yield from notes.noted(made, m, mark)
    if made is None and m < n:  # it does not fit after all (with the note a question asked since gets): a new cut
        m, mark = n, (yield from new_cut(past, n, budget, size_of))[0]
        made = yield from made_at(n, mark)
    if made is None:
        return None
    under = made[0].total < room_bar(budget)
    record = LastCut.of(dialect, messages, counts, (m, mark), under, made[0].origin)
    return (*made, None, recorded(replace(record, edited=edited, room=budget.room), made))


def _of_this(req: Counted, records: Sequence[LastCut]) -> list[LastCut]:
    """The records of this history (`LastCut.of_this`); where none is, the one of them it is the
    history of, slid (a client that keeps a window of its newest messages: `slid_to`), whose turn
    was the latest: of those it slid past, the longest history. With a summarizer, its cut goes
    with the summary that turn sent, though the client took out messages it stands for
    (`guard.fit.cut_summaries`: found by its span's digest, `LastCut.summary`)."""
    dialect, messages, counts = req.dialect, req.messages, req.counts
    ours = [r for r in records if r.of_this(dialect, messages, counts)]
    if ours:
        return ours
    slid = [s for r in records if (s := slid_to(r, dialect, messages, counts)) is not None]
    return [max(slid, key=lambda s: s.history)] if slid else []  # (the newest turn's: it covers the most)


def _carry(
    req: Counted, budget: Budget, own: tuple[_Cuts, Notes, CutAt], last: LastCut
) -> Generator[Any, Any, tuple[Carried | None, bool]]:
    """The cut of the record `last` carried by this request, made as it was for its room, where it
    fits and keeps the room bar (or was under it when made: the client's stubs may leave it under);
    and whether the client edited the history since (the same messages go again: `History.dropped`)."""
    as_made, its_notes, its_made_at = _made_for(req, budget, last.room, own)
    as_made.ghost, edited = max(last.taken(req.counts), -req.fixed), last.edited or last.changed(req.counts)
    if edited:
        as_made.dropped = last.dropped_messages
        as_made.dropped_ghost = max(last.taken_from_dropped(req.counts), -as_made.ghost)
        as_made.slid = (last.slid, last.dropped[0][0]) if last.slid and last.dropped else (0, 0)
        as_made.held = HeldSummary.of(last) if as_made.slid[0] else HeldSummary()
    made = yield from its_notes.noted((yield from its_made_at(last.length, last.mark)), last.length, last.mark)
    if made is not None and (made[0].total >= room_bar(as_made.budget) or last.under_bar):
        return (*made, None, recorded(last.carried(req.counts), made)), edited
    return None, edited


def _older(last: LastCut, past: Past, counts: Sequence[int]) -> bool:
    """Whether `last` is the record of a request of this history older than the one just before
    it, with nothing of that request changed since (a client's edits are for the replay)."""
    return not last.edited and last.history in past.requests[:-1] and not last.changed(counts)


def _made_for(req: Counted, budget: Budget, room: int, own: tuple[_Cuts, Notes, CutAt]) -> tuple[_Cuts, Notes, CutAt]:
    """The cuts, notes and cut maker that make a carried cut again as it was made, for a request
    whose room was `room` (a record's or an anchor's; 0: not recorded): this request's `own` where
    its room is the same, else ones made for that room and carried to this request's. A client
    that sets `max_tokens` turn by turn changes the room, and with it where a prefix fit of the
    same mark stops (its band, its room bar, its notes' and summaries' room); the cut it made stays
    byte for byte while it fits this request's room."""
    then, cuts = budget.with_room(room) if room else budget, own[0]
    check = cuts.ctx.carry_room or budget.room  # (the room it is checked against: `Context.carry_room`)
    if then is budget and check == cuts.room:
        return own
    as_made = _Cuts(req, then, cuts.ctx, cuts.summarizing, room=check)
    summaries = CutSummaries(as_made) if as_made.summarizing else None
    its_notes = Notes(req, then, cuts.ctx, as_made.sent, as_made.cut, as_made.size)
    its_notes.room, its_notes.prefix_size = check, summaries.carry_size if summaries else as_made.size
    return as_made, its_notes, summaries.made if summaries else as_made.made


_CUTTING = of_kind("lossy", "summary", "newest")  # the steps that cut
CutAt = Callable[[int, int], Generator[Any, Any, Made]]
# a carried cut: the request as cut, its context, the leading messages it was made on, its anchor, its record
Carried = tuple[Conversation, Context, int, Anchor | None, LastCut | None]


def _anchored(
    cut_at: CutAt, req: Counted, total: int, budget: Budget, state: str
) -> Generator[Any, Any, Carried | None]:
    """A cold cache (nothing to break): the whole request cut below the band, halfway to the room
    bar, so the cut lasts longer than a band; an anchor that no longer fits: to the bottom of the
    band. Where whole turns land under the bar there, at the next mark up; where none fits, the
    first that does. The cut is anchored (remembered by the shell) for the turns after it."""
    bar, counts, n = room_bar(budget), req.counts, len(req.counts)
    marks = ((bar + budget.floor) // 2, budget.floor) if state == "cold" else (budget.floor,)
    first: Carried | None = None
    for mark in dict.fromkeys((*marks, quantized_stop(total, budget.target, budget.band))):
        made = yield from cut_at(n, mark)
        if made is not None and (made[0].total >= bar or first is None):
            under = made[0].total < bar
            record = LastCut.of(req.dialect, req.messages, counts, (n, mark), under, made[0].origin)
            first = (*made, Anchor(n, mark, sum(counts), budget.room), recorded(record.made_for(budget.room), made))
            if made[0].total >= bar:
                break
    return first


class _Cuts:
    """The cuts of one request's history: of its first `m` messages down to a mark, carried to the
    request (`at`), or the tokens of such a cut of a past request (`size`). `sent`: each message's
    tokens as it goes once the request is over its room (its JSON compacted form's, counted
    exactly, where that is fewer); `known`: the summaries the prefixes tried here got, by span
    (see `_prefix`); `made_here`: the request's own cuts, by mark, for the caller to send. The cuts
    are made for `budget`, carried to a request whose room is `room` (the budget's; `_made_for`)."""

    def __init__(self, req: Counted, budget: Budget, ctx: Context, summarizing: bool, room: int | None = None) -> None:
        dialect, messages, policy = req.dialect, req.messages, ctx.policy
        self.dialect, self.messages, self.counts, self.fixed = dialect, messages, req.counts, req.fixed
        self.budget, self.policy, self.ctx, self.summarizing = budget, policy, ctx, summarizing
        self.room = budget.room if room is None else room
        self.known: dict[int, tuple[str, str]] = {}
        self.floors: dict[int, int] = {}
        self.made_here: dict[int, tuple[Conversation, Context, int] | None] = {}
        self.fitted: dict[tuple[Any, ...], Any] = {}  # this request's prefix fits (see `_prefix`)
        # tokens the client took out of a carried cut's prefix since it was made (`guard.fit.edited`)
        self.ghost = 0  # the prefix is cut as if they were still there: the same oldest turns go
        self.dropped: frozenset[int] = frozenset()  # and the messages it dropped go again
        self.dropped_ghost = 0  # (with the tokens the client took out of them: `History.dropped_ghost`)
        self.slid = (0, 0)  # (and the messages it took out where their first run starts: `History.slid`)
        self.held = HeldSummary()  # (and the summary its record's turn sent: `guard.fit.cut_summaries`)
        self.keys = PrefixKeys(req, budget, policy, summarizing)
        self.forms = SentForms(req, ctx.counter, policy.allows("compact_json"), self.keys.hashes)
        self.sent = self.forms.sent()

    def size(self, m: int, mark: int) -> Generator[Any, Any, int | None]:
        """The tokens of the cut of this history's first `m` messages down to `mark` (None: it
        cannot be made): a past request's cut is made again where the engine does not remember it
        (a new worker or replica; with a summarizer, its summaries come from the summary cache,
        where that request left them); the request's own cut is kept in `made_here`."""
        key = (*self.keys(m, mark), *self._edits())
        sizes = memo.current().cut_sizes
        if m < len(self.messages) and key in sizes:
            return sizes.get(key)
        made = yield from self.at(m, mark, end=m)
        if m == len(self.messages):
            self.made_here[mark] = made
        return sizes.put(key, made[0].total if made is not None else None)

    def made(self, m: int, mark: int, over: int = 0) -> Generator[Any, Any, Made]:
        """The cut of the first `m` messages to `mark`, carried to the request: the request's own
        (kept by `size`) or made now (`at`, with `over`)."""
        if m == len(self.messages) and mark in self.made_here:
            return self.made_here.pop(mark)
        return (yield from self.at(m, mark, over=over))

    def summarized_at(self, m: int, mark: int) -> Generator[Any, Any, Made]:
        """`at`, the prefix summarized as any request is (a cold provider cache: see `_anchored`)."""
        return (yield from self.at(m, mark, summaries=self.summarizing))

    def at(
        self, m: int, mark: int, end: int | None = None, summaries: bool = False, over: int = 0
    ) -> Generator[Any, Any, tuple[Conversation, Context, int] | None]:
        """The cut of the first `m` messages down to `mark`, carried to the request (or, with
        `end`, to the past request of the first `end` messages), if it fits the room (plus `over`:
        a cut whose markers a summary is yet to replace); with `summaries`, the prefix summarized
        as a request is (its spans, in quarter bands)."""
        messages, counts = self.messages, self.counts
        end = len(messages) if end is None else end
        found = yield from self.cut(m, mark, summaries)
        if found is None:
            return None
        cut, part = found
        # what follows the prefix goes JSON compacted where that saves tokens (`sent`: counted exactly)
        tail, tail_counts = list(messages[m:end]), list(self.sent[m:end])
        for j, n in enumerate(tail_counts):
            if n < counts[m + j]:
                part.record("compact_json", counts[m + j] - n, 1)
                tail[j] = self.forms.form(m + j)
        conv = followed_by(cut, tail, tail_counts, m)
        if conv.total > self.room + over:
            return None
        return conv, part, m

    def cut(
        self, m: int, mark: int, summaries: bool = False
    ) -> Generator[Any, Any, tuple[Conversation, Context] | None]:
        """The cut of the first `m` messages down to `mark`, its lossy steps ranking by the band's
        question (the one its prefix ended with: a later one gets a note, see `Notes`); None where
        it cannot be made within its mark, nor within a marker of its floor."""
        if mark <= self.fixed + self.ghost:
            return None
        # the prefix's pinned and newest turns alone may be over its mark (newest turns that fill
        # most of a small room): then no cut lasts a band, and the prefix is cut as deep as it can
        # go; that cut is carried while the request fits, and the request is fitted whole once it
        # does not (where they leave no room for a cut, only the last resort fits it: `_no_room`)
        floor = self._floor(m) + self.ghost
        inside = _no_room(self, m, self.ghost)
        deepest = floor > mark and not inside
        mark = mark if inside else max(mark, floor)
        cut, part = yield from self._prefix(m, mark, query(self.dialect, self.messages[:m]), summaries)
        # a cut within a marker of its floor went as deep as it can (a whole-turn mark is sized
        # from the replay's counts, the floor from what is sent, and the marker comes on top; one
        # inside newest turns over the room may stop short of its mark and still fit: `at` checks)
        deepest = deepest or cut.total <= floor + FIRST_MARK_SLACK
        if (cut.total > mark and not deepest) or cut.fixed != self.fixed + self.ghost:
            return None  # (or the messages a carried cut dropped did not go again: `History.dropped`)
        return (replace(cut, fixed=self.fixed) if self.ghost else cut), part

    def _edits(self) -> tuple[Any, ...]:
        """What a cut of this history is made again with, where the client edited it since."""
        return self.ghost, self.dropped, self.dropped_ghost, self.slid

    def aged(self, m: int, end: int) -> bool:
        """Whether a cut of the first `m` messages is one the policy carries only while its newest
        turns are the newest (`last_resort_cuts: recut`, `guard.fit.replay.last_cut`), and at the
        request of the first `end` they no longer are: those of the first `m` left no room for a cut
        (`_no_room`: the last resort cut inside them), those of the first `end` do. Never under `carry`."""
        return self.policy.last_resort_cuts == "recut" and _no_room(self, m) and not _no_room(self, end)

    def _floor(self, m: int) -> int:
        """The fixed tokens and those of the first `m` messages that no step but the last resort
        cuts (pinned ones and the newest turns), worked out once per prefix. Where that leaves no
        room for a cut (`_no_room`: a result larger than the room), the prefix is cut inside its
        newest turns down to its mark, once, and that cut is carried byte for byte like any other."""
        if m not in self.floors:
            key = (self.keys(m, 0), self.ctx.counter)  # (the prefix, budget, policy; `sent` is the counter's)
            floors = memo.current().floors
            floor = floors.get(key)
            if floor is None:
                keeping = Keeping.of(self.policy, self.budget)
                floor = self.fixed + kept_whole(self.dialect, self.messages[:m], self.sent[:m], self.fixed, keeping)
                floors.put(key, floor)
            self.floors[m] = floor
        return self.floors[m]

    def _prefix(
        self, m: int, mark: int, question: str | None, summaries: bool = False
    ) -> Generator[Any, Any, tuple[Conversation, Context]]:
        """`_fit_prefix`, made once per engine while the prefix, mark, budget, policy, question and
        counter stay the same (a carried cut's later turns cost the replay and the messages added
        since), and once per request whatever the engine keeps (a past request's cut is sized, then
        carried); summarized, each time. A hit is taken for these very messages only (the key holds
        their hashes: a collision never sends another conversation's text)."""
        if summaries:
            return (yield from _fit_prefix(self, m, mark, question, summaries))
        # (the counter itself: an engine keeps one per encoding, factor and image formula)
        key = (self.keys(m, mark), question, tuple(self.ctx.actions), self.ctx.counter, *self._edits())
        prefixes, prefix = memo.current().prefix_cuts, self.messages[:m]
        made = self.fitted.get(key) or prefixes.get(key)
        if made is None or made[0] != prefix:
            made = (prefix, *(yield from _fit_prefix(self, m, mark, question)))
            prefixes.put(key, made, 4 * sum(self.counts[:m]))
        self.fitted[key] = made
        _, cut, part = made
        return cut, replace(part, ledger=part.ledger.copy(), summarized=part.summarized.copy())


def _no_room(cuts: _Cuts, m: int, ghost: int = 0) -> bool:
    """Whether the pinned messages and newest turns of the first `m` messages of `cuts` (`_floor`,
    with `ghost`) leave no room for a cut's marker: only the last resort, cutting inside them, fits
    that prefix (a result larger than the room, or within a marker of it: session 59, a DeerFlow
    turn whose pinned and newest turns left 3 tokens)."""
    return cuts._floor(m) + ghost + FIRST_MARK_SLACK > cuts.budget.room


def _fit_prefix(
    cuts: _Cuts, m: int, mark: int, question: str | None, summaries: bool = False
) -> Generator[Any, Any, tuple[Conversation, Context]]:
    """`guard.fit.prefix_fit.fit_prefix` for the first `m` messages of `cuts`' history (the one
    place a carried cut's prefix is fitted: tests count the fits here)."""
    return (yield from fit_prefix(cuts, m, mark, question, summaries, no_room=_no_room(cuts, m)))
