"""What the last question is about: relevance verdicts per band of the history, and the questions a
request asks (what a question asks about that a cut removed: `guard.fit.notes`)."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from guard.core import relevance
from guard.dialects import Dialect
from guard.fit import summary
from guard.fit.history import History


def history_of(
    dialect: Dialect,
    messages: tuple[Mapping[str, Any], ...],
    counts: tuple[int, ...],
    bm25: bool,
    question: str | None = None,
) -> History:
    """The history a fit reads: its transcript rendered on first use and, with BM25 relevance, what
    `question` (by default the last user message) is about."""

    @functools.cache
    def transcript() -> list[str]:
        return summary.transcript(dialect, messages)

    def scores(summarized: frozenset[int], edges: tuple[int, ...]) -> frozenset[int]:
        return relevant_origins(dialect, messages, transcript, summarized, edges, query=question)

    return History(messages, counts, transcript, scores if bm25 else None)


def relevant_origins(
    dialect: Dialect,
    messages: tuple[Mapping[str, Any], ...],
    transcript: Callable[[], list[str]],
    summarized: frozenset[int],
    edges: tuple[int, ...],
    query: str | None = None,
) -> frozenset[int]:
    """Indices of the messages (not system, not the last user turn or its copies, not summarized,
    not after the last of `edges`) the last user message is about. Each band of the history (between two
    edges) is judged with BM25's statistics of the history up to its own end, so a band, once
    whole, keeps its verdicts however far the conversation grows."""
    users = [i for i, m in enumerate(messages) if dialect.is_user_turn(m)]
    if not users:
        return frozenset()
    lines = transcript()
    last = users[-1]
    if query is None:  # (a carried cut scores its prefix against the whole request's question)
        query = lines[last].split("] ", 1)[-1]  # without the "[user]" label every user line would share
    # earlier copies of the question are not what it is about: agent frameworks resend the same
    # nudge ("please proceed") as a user turn, and each copy would match it best, set the bar of
    # what counts as relevant and move with every new copy
    candidates = [
        i
        for i, m in enumerate(messages[: edges[-1] + 1])
        if lines[i] != lines[last]
        and lines[i].split("] ", 1)[-1] != query
        and i not in summarized
        and not dialect.is_system(m)
    ]
    ends = [bisect.bisect_right(candidates, edge) for edge in edges]
    hot = relevance.relevant_in_bands(query, [lines[i] for i in candidates], ends)
    return frozenset(candidates[j] for j in hot)


def questions(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The user turns' transcript lines without their label (what relevance scores against), in order."""
    users = [m for m in messages if dialect.is_user_turn(m)]
    return [line.split("] ", 1)[-1] for line in summary.transcript(dialect, tuple(users))] if users else []


def query(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The last user message's question (see `questions`): found from the end (a carried turn of a
    long history asks this of every prefix it sizes)."""
    last = next((m for m in reversed(messages) if dialect.is_user_turn(m)), None)
    return None if last is None else questions(dialect, [last])[0]
