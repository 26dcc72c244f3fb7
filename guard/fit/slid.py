"""Clients that keep a window of their newest messages (AutoGen's buffered chat context, LangChain's
`trim_messages`, OpenHands' recent-events condenser): past the window, each turn takes the oldest
messages after the task out, so the untrimmed loop's cached prefix ends at the task on every turn.

Where all the client took out are messages the carried cut leaves out (from the start of its first
run of dropped messages), the cut is found in the slid history by the counts of what leads that run
and of everything from its end on, at a place that many messages earlier (`LastCut.window`), and
carried as it was: the same messages go first (`History.dropped`, `guard.fit.rounds`), the run's
marker still counts what it stands for, and where the client took the whole run out the marker
stays on its own (`guard.fit.strategies.drop.standing_marker`). The prompt is the one the last turn
sent plus what the client added, and its cached prefix holds. Without the conversation's record
(another worker, no shared store) the history is cut as any other is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from guard.dialects import Dialect
from guard.fit.edited import LastCut, counts_digest, rollout, spine, windows_at


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
