"""Clients that keep a window of their newest messages (AutoGen's buffered chat context, LangChain's
`trim_messages`, OpenHands' recent-events condenser): past the window, each turn takes the oldest
messages after the task out, so the untrimmed loop's cached prefix ends at the task on every turn.

Where all the client took out are messages the carried cut leaves out (from the start of its first
run of dropped messages), the cut is found in the slid history by the counts of what leads that run
and of everything from its end on, at a place that many messages earlier (`LastCut.window`), and
carried as it was: the same messages go first (`History.dropped`, `guard.fit.rounds`), the run's
marker still counts what it stands for, and where the client took the whole run out the marker
stays on its own (`guard.fit.strategies.drop.standing_marker`). The prompt is the one the last turn
sent plus what the client added, and its cached prefix holds; with a summarizer, the summary that
turn sent stays in its place, found by its span's digest (`HeldSummary`, `recorded`). Without the
conversation's record (another worker, no shared store) the history is cut as any other is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from guard.dialects import Dialect
from guard.fit.conversation import Context, Conversation
from guard.fit.edited import LastCut, counts_digest, rollout, spine, windows_at
from guard.fit.spans import digest_of


def slid_to(
    cut: LastCut, dialect: Dialect, messages: Sequence[Mapping[str, Any]], counts: Sequence[int]
) -> LastCut | None:
    """`cut` in `messages` (each `counts` tokens), where they are its history slid: the client
    took out messages from the start of the first run the cut leaves out (some or all of them),
    none of those it keeps (what leads that run and everything from the run's end on has the counts
    it had, at a place that many messages earlier; at least two messages from its end on, so a
    count alone never matches). None where they are not."""
    if not cut.window or not cut.dropped:
        return None
    start, end = cut.dropped[0]
    tail = cut.history - end
    if tail < 2:
        return None
    places = range(end - 1, start - 1, -1)  # (one message taken out, two, ..., the whole run)
    found = next((at for at, digest in windows_at(counts, start, tail, places) if digest == cut.window), None)
    return _slid(cut, dialect, messages, counts, end - found) if found is not None else None


def _slid(
    cut: LastCut, dialect: Dialect, messages: Sequence[Mapping[str, Any]], counts: Sequence[int], taken: int
) -> LastCut:
    """`cut`, `taken` more messages taken out of the start of its first dropped run: made again on
    the history as it is now (`edited`: the same messages go first)."""
    (start, end), rest = cut.dropped[0], cut.dropped[1:]
    length, history = cut.length - taken, cut.history - taken
    return replace(
        cut,
        length=length,
        history=history,
        digest=counts_digest(counts[:history]),
        spine=spine(dialect, messages, counts, length),
        edited=True,
        dropped=((start, end - taken), *((a - taken, b - taken) for a, b in rest)),
        rollout=rollout(dialect, messages),
        since=max(0, cut.since - taken),
        slid=cut.slid + taken,
    )


@dataclass(frozen=True)
class HeldSummary:
    """The summary a carried cut's record's turn sent (`LastCut.summary`), for a turn the client
    slid the cut (took out the oldest messages it left out, `slid_to`): the digest of its span
    ("": that turn sent none), the messages and tokens the span held, and the budget it was asked
    with (0: not recorded); and the mark the cut was made to and the room it left its summary
    (`guard.fit.cut_summaries.CutSummaries._planned`; mark 0: not recorded)."""

    digest: str = ""
    messages: int = 0
    tokens: int = 0
    budget: int = 0
    mark: int = 0
    room: int = 0

    @classmethod
    def of(cls, last: LastCut) -> HeldSummary:
        """The summary of the record `last`, slid: its span is what the cut dropped and what the
        client took out of that since."""
        messages, plan = len(last.dropped_messages) + last.slid, (last.summary_mark, last.summary_room)
        return cls(last.summary, messages, last.dropped_tokens, last.summary_budget, *plan)


def recorded(record: LastCut, made: tuple[Conversation, Context, int]) -> LastCut:
    """`record`, of a cut sent as `made`, with what a turn that slid it makes it again by: the
    digest of the span its summary stands for and the summary's budget ("", 0: it went without
    one), the mark it was made to and the room it left its summary (`HeldSummary`)."""
    summarized, placed = made[1].summarized, made[1].summarized.request
    digest, budget = (digest_of(placed), placed.max_tokens) if summarized.message is not None else ("", 0)
    mark, room = summarized.plan
    return replace(record, summary=digest, summary_budget=budget, summary_mark=mark, summary_room=room)
