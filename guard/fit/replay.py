"""The replay of a history's past turns: where the cut a request carries was made (`last_cut`),
and the marks a new cut tries (`low_water`, `choose_mark`). Counts only: pure functions of the
history's per-message counts and of the sizes of its past cuts. The words: the *room* (input tokens
a request may carry), a *band* (`cut_quantum_ratio` of the room), the *room bar* (the least share of
the room a cut should leave), a *carried cut* (one made on a prefix, sent on later turns); all of
them in docs/glossary.md."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Any

from guard.core.budget import Budget
from guard.dialects import Dialect, turn_boundaries

# a cut leaves at least this share of the room where a turn boundary allows (a deeper cut wastes it)
ROOM_BAR = 0.6
# the rewrites alone (compact JSON, metadata) are the first cut only where they leave at least this
# share of a band free: one that leaves less lasts a turn or two, and the new cut after it breaks
# the cache a second time (bench.cache: 9 of 56 loops cheaper, none dearer; tau2 telecom 1.09 -> 0.95).
# A whole band, as a new cut's low-water mark leaves (session 33, half a band before): JSON-heavy
# loops whose rewrites leave 0.71-0.82 of the room paid a second full cache write when they ran out
# (73 loops at 30/50/70%: 9 rows cheaper, agent_trace4 at 70% 1.09 -> 0.81, none dearer by more
# than 0.008; the 45 held-out loops the same on every row)
REWRITES_HEADROOM = 1.0
# a new cut's first mark sits this far above the deepest whole-turn cut it aims at (its marker
# fits; never past halfway to the next turn up): truncation fills no further, so the cut lasts
# (bench.cache, 60 loops and 36 held-out at 30/50/70%: mean bill over lower on all six, 1.034 ->
# 1.013 on the held-out at 70%, against halfway to the next turn up)
FIRST_MARK_SLACK = 64
# the replay walks a history's last this many rooms at most: each past crossing costs a fit of its
# prefix, so a history many rooms long cost its first fit on a worker (no record of its last turn)
# a fit per crossing of all of it (a 10,000-message conversation into a 4k window: 75 prefix fits,
# 12 s; 2.8 s with 6 rooms). Longer histories start the replay at a point that moves by half that
# span at a time (a pure function of the history: every turn in between replays the same past, so
# its cut is carried as before; where the start moves, the crossings after it fall in step with
# the whole replay's again: bench.cache's loops at 6% and 12% of their size, up to ~16 rooms,
# send the same with 6 rooms as with the whole history; with 4, five of 132 rows cut once more)
REPLAY_ROOMS = 6
# how many of a history's last turns `turn_growth` looks at: a whole-turn cut that keeps the room
# bar counts as lasting only where it leaves their median growth free (session 37: smolagents
# re-reading a 14k-token page, turn after turn, in a room of 35k: a cut to 0.89 of the room lasted
# one turn, 1.498 of the untrimmed bill, now 0.672; 83 loops at 30/50/70%: 17 rows cheaper, 3
# dearer by 0.014-0.035, mean bill 0.610/0.781/0.951 -> 0.608/0.777/0.937; the median rather than
# the largest step: a single large read does not send the next cuts under the bar)
GROWTH_TURNS = 4

SizeOf = Callable[[int, int], Generator[Any, Any, "int | None"]]
NoteOf = Callable[[int, int], Generator[Any, Any, "tuple[int, int] | None"]]


def room_bar(budget: Budget) -> int:
    """The fewest input tokens a cut may leave: `ROOM_BAR` of the room."""
    return math.ceil(budget.room * ROOM_BAR)


def turn_starts(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Where each turn group after the first begins: the points a past request of this history
    could have ended at (a boundary never splits a call from its results)."""
    return turn_boundaries(dialect, messages)[0]


def cumulative(counts: Sequence[int]) -> list[int]:
    out = [0]
    for n in counts:
        out.append(out[-1] + n)
    return out


@dataclass(frozen=True)
class Past:
    """A history as its past requests went: its messages, each one's tokens as the client sent it
    (`raw`) and as it goes once a request is over its room (`sent`: JSON compacted where that saves
    tokens), and the request's fixed tokens. What the replay needs of it is worked out on first use."""

    dialect: Dialect
    messages: tuple[Mapping[str, Any], ...]
    raw: Sequence[int]
    sent: Sequence[int]
    fixed: int

    @cached_property
    def est(self) -> list[int]:
        """Cumulative `sent` tokens: `est[j]`, the first j messages as they go over the room."""
        return cumulative(self.sent)

    @cached_property
    def whole(self) -> list[int]:
        """Cumulative `raw` tokens."""
        return cumulative(self.raw)

    @cached_property
    def _boundaries(self) -> tuple[list[int], list[int]]:
        return turn_boundaries(self.dialect, self.messages)

    @property
    def starts(self) -> list[int]:
        """The turn boundaries (`turn_starts`)."""
        return self._boundaries[0]

    @property
    def requests(self) -> list[int]:
        """The turn boundaries a past request may have ended at: where the history does not end
        with a reply of the model's (`turn_boundaries`)."""
        return self._boundaries[1]

    @cached_property
    def users(self) -> list[int]:
        """Where the user turns are."""
        return [i for i, m in enumerate(self.messages) if self.dialect.is_user_turn(m)]

    def asks(self, start: int, end: int) -> bool:
        """Whether a user turn is among messages `start` to `end` (excluded)."""
        users = self.users
        i = bisect.bisect_left(users, start)
        return i < len(users) and users[i] < end

    @cached_property
    def first(self) -> int:
        """How many messages lead the history, pinned (`head_length`)."""
        return head_length(self.dialect, self.messages)


def last_cut(
    past: Past,
    budget: Budget,
    size_of: SizeOf,
    carry_of: SizeOf | None = None,
    note_of: NoteOf | None = None,
    aged: Callable[[int, int], bool] | None = None,
) -> Generator[Any, Any, tuple[int, int] | None]:
    """Where this history's current cut was made and the mark it was cut to: the prefix length (a
    turn boundary, or the whole request) of the last turn that needed a new one, found by replaying
    the history's past turn boundaries as requests; None if none did (the request fits as sent).

    A past request that fit its room was sent whole. The first that did not got a cut: to the room
    itself where compaction and the other rewrites every overflow gets were enough and left a band
    free (`REWRITES_HEADROOM`; a mark of the room), else a new cut down to its low-water mark
    (`low_water`). Every later request carried that cut while the cut (`size_of`: its tokens, None
    if it could not be made) plus what was added since still fit the room, and the first that did
    not got the next new cut. A pure function of the history: the same on every turn, worker and
    replica, so a cut is kept byte for byte for exactly as long as it fits (see `carried`).

    `aged`, where given, says of a cut of the first m messages and a later request ending at message
    b whether the cut was made inside its newest turns and is carried only while they are the
    newest, which at b they no longer are (`last_resort_cuts: recut`: the pinned messages and newest
    turns alone were over the room, so the last resort truncated a result larger than it): that
    request gets a new cut, which its whole-turn marks take under the truncated result
    (docs/benchmarks.md, session 45).

    `carry_of`, where given, is the size a cut is carried with once its mark is chosen by
    `size_of` (with a summarizer: the cut with the summary its request sent, see `carried`);
    `note_of`, where given, where a cut's note goes and its tokens (`guard.fit.notes`): the
    requests from that message on carried it too. Only the history's last `REPLAY_ROOMS` rooms
    are replayed (`replay_start`): a longer history's first request after that start gets a new cut."""
    est, whole, fixed, n = past.est, past.whole, past.fixed, len(past.messages)
    room = budget.room
    rewritten = room - math.ceil(budget.band * REWRITES_HEADROOM)  # the most the rewrites alone may leave
    cut: tuple[int, int] | None = None  # (prefix length, its mark)
    size = 0
    first = bisect.bisect_left(est, replay_start(est[n], room))  # (the message the replay starts at)
    for b in (*past.requests[bisect.bisect_left(past.requests, first) :], n):
        if cut is None:
            if fixed + whole[b] <= room:
                continue
            if fixed + est[b] <= rewritten:  # over the room, well under it once compacted: the rewrites alone
                if b == n:
                    return b, room
                cut, made = (b, room), (yield from (carry_of or size_of)(b, room))
                size = made if made is not None else room + 1
                continue
        elif aged is None or not aged(cut[0], b):  # (else its turns aged: a new cut)
            note = (yield from note_of(*cut)) if note_of is not None and past.asks(cut[0], b) else None
            if size + est[b] - est[cut[0]] + (note[1] if note is not None and note[0] < b else 0) <= room:
                continue
        mark, made = yield from new_cut(past, b, budget, size_of)
        if b == n:  # a new cut of the request itself: the caller sends it
            return b, mark
        if made is not None and carry_of is not None:
            made = yield from carry_of(b, mark)
        cut, size = (b, mark), made if made is not None else room + 1  # (an impossible cut is left at once)
    return cut


def replay_start(total: int, room: int) -> int:
    """The tokens of history (as it goes over the room) before which the replay does not look: 0
    for a history of at most `REPLAY_ROOMS` rooms, else that many rooms before its end, rounded
    down to a multiple of half that span (so the start moves by half the span at a time)."""
    span = REPLAY_ROOMS * max(1, room)
    return max(0, (total - span) // (span // 2) * (span // 2))


def new_cut(past: Past, end: int, budget: Budget, size_of: SizeOf) -> Generator[Any, Any, tuple[int, int | None]]:
    """The mark a new cut of the first `end` messages goes to, and that cut's tokens: the first of
    `low_water`'s marks that `choose_mark` keeps."""
    return (yield from choose_mark(end, low_water(past, end, budget), budget, size_of))


def choose_mark(
    end: int, marks: tuple[int, ...], budget: Budget, size_of: SizeOf
) -> Generator[Any, Any, tuple[int, int | None]]:
    """The first of `marks` whose cut of the first `end` messages leaves at least the room bar, and
    that cut's tokens. Where none does (or none can be made without cutting into the newest
    turns), the chosen mark raised, by what its cut fell short of the bar, then halfway to the
    room, then to the room (truncation and drops step coarsely and can land well under a mark),
    until a cut leaves the bar; else the first cut that can be made (None: none can). A mark under
    the bar (a band over 40% of the room, whose cuts reach below it by design, or a whole-turn cut
    where none keeps the bar: `low_water`) is not raised where its cut can be made."""
    bar = room_bar(budget)
    chosen: tuple[int, int | None] | None = None
    for mark in marks:
        size = yield from size_of(end, mark)
        if chosen is None or chosen[1] is None:
            chosen = (mark, size)
        if size is not None and size >= bar:
            return mark, size
    assert chosen is not None
    mark, size = chosen
    if mark < bar and size is not None:  # (see `low_water`) its cuts reach below the bar by design
        return chosen
    short = mark + bar - size if size is not None else mark
    for higher in dict.fromkeys((short, (mark + budget.room) // 2, budget.room)):
        if mark < higher <= budget.room:
            raised = yield from size_of(end, higher)
            if raised is not None and (raised >= bar or chosen[1] is None):
                chosen = (higher, raised)
                if raised >= bar:
                    break
    return chosen


def lasting(room: int, band: int, growth: int = 0) -> int:
    """The largest whole-turn cut that keeps the room bar and lasts: one within a quarter band of
    the room is carried a turn or two at most, so it does not count as keeping the bar (`low_water`);
    where the history's turns grow by more (`turn_growth`: turns that are a large share of the
    room), one that leaves less than a turn's growth free (at most a band) does not either."""
    return room - max(band // 4, min(growth, band))


def turn_growth(requests: Sequence[int], est: Sequence[int], end: int) -> int:
    """How much the history grew from one request to the next, over the last `GROWTH_TURNS`
    requests up to the one ending at message `end` (the median; `requests`, where past requests
    ended, `est`, cumulative tokens as sent over the room). A pure function of the history, and the
    same whether `end` is the request being fitted or a past one the replay goes over (which
    `requests` holds: the last turns are those before it either way)."""
    last = bisect.bisect_left(requests, end)  # (`requests` ascend)
    ends = sorted({*requests[max(0, last - GROWTH_TURNS) : last], end})
    steps = sorted(est[b] - est[a] for a, b in pairwise(ends))
    return steps[len(steps) // 2] if steps else 0


def task_messages(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """Where the task is: the first user message, and the last of the user messages right after it
    (holding no tool results) where the model's reply follows them: the first user turn opens with
    its instructions or context and ends with the request the model's first reply answers. Agents
    that send their instructions as a user message send the task as the next one (TapeAgents'
    steps schema, then the question; Codex's AGENTS.md and environment, then the prompt; Copilot
    Chat's environment, then the request with its attachments); a client that sends passages as
    user messages before its question keeps the first and the question (the passages between go
    as any history does). Empty without a user message."""
    first = next((i for i, m in enumerate(messages) if dialect.is_user_turn(m)), None)
    if first is None:
        return ()
    end = first + 1
    while end < len(messages) and dialect.is_user_turn(messages[end]) and not dialect.tool_result_ids(messages[end]):
        end += 1
    return (first, end - 1) if end - 1 > first and end < len(messages) else (first,)


def head_length(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> int:
    """How many messages lead the history up to its task (system prompt and task: pinned;
    `task_messages`, where the request follows the instructions it opens with)."""
    task = task_messages(dialect, messages)
    if not task:
        return 0
    return task[-1] + 1 if task[-1] == task[0] + 1 else task[0] + 1


def low_water(past: Past, end: int, budget: Budget) -> tuple[int, ...]:
    """The marks a new cut of the first `end` messages tries, in order, each deep enough to last a
    band of growth: a cut's cost is the cache write it causes, so the deeper it goes (never under
    the room bar where a whole-turn cut keeps it) the longer it lasts and the less it costs.
    First, where a whole-turn cut lands between the bottom of the band below the target
    (`Budget.floor`) and a quarter band under it (never under the room bar: with the default band,
    the bar), the deepest of them (its mark `FIRST_MARK_SLACK` over it, at most halfway to the
    next turn up, so a drop stops there, its marker included); then halfway from the band's bottom
    to there (truncation fills to it where whole turns step coarsely); then the band's bottom;
    then, for where those leave less than the bar (turns that are a large share of the room), the
    smallest whole-turn cut over it, if one fits the room. Where no whole-turn cut lands between
    the bar and a quarter band under the room, or the last turns' median growth where that is more
    (`lasting`, `turn_growth`: one over that is carried a turn or two at most), the largest one
    under the bar alone, however little it keeps: truncating old results
    to keep the bar would keep a large result's head in a cut that cannot last (session 34: a
    13.6k-token file read in a room of 19k, kept truncated, was cut again 14 turns later, 1.11 of
    the untrimmed loop's bill against the best cuts' 0.58; session 35: a floor of a quarter of the
    room on that cut, meant to keep a file just read, left two held-out loops of other agents at
    1.001 and 0.628 against the best cuts' 0.563 and 0.441, and changed no other row of 136 loops
    but one, by 0.001; session 36: a held-out Gemini CLI session whose 24k-token search result
    left one whole-turn cut over the bar, at 0.998 of the room, truncated the result to keep the
    bar and paid 0.746 of the untrimmed bill against the best cuts' 0.445, now 0.415). Whole-turn
    cuts keep the messages that lead the history (system prompt and task, pinned) and the newest
    whole turns.
    (bench.cache, 60 loops at half their size: median bill 0.78 -> 0.765 against the band's bottom
    first, 10 rather than 16 loops over the best cuts' bill + 0.05.)"""
    bar, floor = room_bar(budget), budget.floor
    if bar > floor:  # (bands over 40% of the room reach below the bar)
        return (floor,)
    est, first = past.est, past.first
    head = past.fixed + est[first]
    sizes = sorted(head + est[end] - est[s] for s in past.starts if first <= s < end)
    # at most a quarter band below the band's bottom: a policy's small band (`cut_quantum_ratio`,
    # to use more of the room) keeps its cuts near the room
    bottom = max(bar, floor - budget.band // 4)
    deepest = [n for n in sizes if bottom <= n < floor]
    over = [n for n in sizes if floor < n <= budget.room]
    top = lasting(budget.room, budget.band, turn_growth(past.requests, est, end))
    if not any(bar <= n <= top for n in sizes):  # no whole-turn cut keeps the bar and lasts
        under = [n for n in sizes if n < bar]
        if under:  # (its mark under the bar and halfway to the next turn up at most: taken as it is)
            up = min([n for n in sizes if n > under[-1]], default=budget.room)
            return (min(under[-1] + FIRST_MARK_SLACK, (under[-1] + up) // 2, bar - 1),)
    marks = [(bottom + floor) // 2, floor, *over[:1]]
    if deepest:
        up = min([n for n in sizes if n > deepest[0]] + [floor])
        marks.insert(0, min(deepest[0] + FIRST_MARK_SLACK, (deepest[0] + up) // 2))
    return tuple(dict.fromkeys(marks))
