"""Histories a client edits between turns. Most agents only append to what they resend, and a
carried cut is found again on every turn by replaying the history's past turns (counts only, see
`guard.fit.replay`). Some change messages they sent before: SWE-agent's `last_n_observations`
replaces all but the newest results with a one-line stub, Claude Code clears old tool results,
others drop a reminder or move their cache breakpoints. The replay then sees a past that was
never sent (smaller: the old results already stubbed), finds that earlier turns fitted, and cuts
anew on every turn while the cut the last turn sent still fits.

So the conversation's record keeps the cut its last turn carried, one per rollout of its task
(`LastCut`: counts, and digests of the per-message counts and of what the rollout is known by, never
text), and the next turn of the same conversation (its replies where they were: `LastCut.of_this`)
carries that cut first, while it fits: its prefix is cut to the same mark as if what the client took
out of it were still there (`LastCut.taken`), so the same oldest turns go and the kept ones are sent
as the client sends them now (the cached prefix holds up to the first message the client changed).
For a history that only grew, that is the cut the replay finds; for one the client changed
(`LastCut.changed`), a new cut, once it no longer fits, is made on the history as it is. Edits that
leave every count as it was (a moved breakpoint) change nothing the replay reads. Without the record
of the turn just before (a worker that did not serve it, without a shared store; a shared store
down) the replay decides, as for any history, so workers that alternate still send the same cut.
Clients that slide a window of their newest messages past the cut: `guard.fit.slid`."""

from __future__ import annotations

import hashlib
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeGuard

from guard.dialects import Dialect


def counts_digest(counts: Sequence[int], extra: bytes = b"") -> str:
    """A digest of per-message counts (and of `extra`), the same in every process (a
    conversation's record is shared by workers and replicas)."""
    digest = hashlib.blake2b(array("q", counts).tobytes(), digest_size=8)
    digest.update(extra)
    return digest.hexdigest()


def spine(dialect: Dialect, messages: Sequence[Mapping[str, Any]], counts: Sequence[int], length: int) -> str:
    """A digest of where the model's own messages are in the first `length` messages of a history
    and their counts, but for its last reply (one message, or a run: reasoning and calls), and of
    what its rollout is known by there (`_identity`): what clients that edit their history leave as
    it was (they stub results, reminders and breakpoints; some rewrite their last exchange, Moatless
    Tools' retried actions), and what tells another conversation with the same task apart (its
    replies differ; another rollout's first calls have other ids, the provider's, even where its
    replies are as long: an eval harness's samples, an agent's retries)."""
    runs = _runs([i for i in range(min(length, len(messages))) if dialect.is_reply(messages[i])])
    before_last = [i for start, end in runs[:-1] for i in range(start, end)]
    return counts_digest([x for i in before_last for x in (i, counts[i])], _identity(dialect, messages, runs))


def rollout(dialect: Dialect, messages: Sequence[Mapping[str, Any]]) -> str:
    """A digest of what a history's rollout of its task is known by (`_identity`): the same on
    every turn of one rollout, another for another rollout; "" before the model's first reply."""
    identity = _identity(dialect, messages, _runs([i for i, m in enumerate(messages) if dialect.is_reply(m)]))
    return hashlib.blake2b(identity, digest_size=8).hexdigest() if identity else ""


def _identity(dialect: Dialect, messages: Sequence[Mapping[str, Any]], runs: Sequence[tuple[int, int]]) -> bytes:
    """What a rollout is known by in these runs of the model's replies: the ids of the calls of the
    first run that calls a tool (a provider makes them anew for every answer, so another rollout's
    differ even where its replies are word for word the same; the first reply may be a greeting with
    no call, as a customer-service agent's, or an acknowledgement of a summary); where none calls a
    tool by id (a text agent), the words of the first run (another rollout's differ, unless its
    model answered word for word the same)."""
    for run in runs:
        ids = "\x00".join(c for i in range(*run) for c in dialect.tool_call_ids(messages[i]))
        if ids:
            return ids.encode("utf-8", "surrogatepass")
    first = "\n".join(dialect.line(messages[i]) for i in range(*runs[0])) if runs else ""
    return first.encode("utf-8", "surrogatepass")


_COUNTS = ("length", "mark", "prefix_tokens", "history")  # a record's counts (`LastCut.from_dict`)
# and those later versions added: 0 where absent
_LATER_COUNTS = ("dropped_tokens", "room", "since", "slid", "summary_budget", "summary_mark", "summary_room")
_TEXTS = ("rollout", "window", "summary")  # digests later versions added: "" where absent


@dataclass(frozen=True)
class LastCut:
    """The cut a conversation's last turn carried: of its first `length` messages (then
    `prefix_tokens` tokens) down to `mark`, in a history of `history` messages whose counts have
    the digest `digest` and whose replies the `spine`; `edited`: the client has changed messages
    of this history since the cut was made (the replay of its past is then not what was sent);
    `under_bar`: the cut left less than the room bar when it was made (whole turns allowed no
    more), so carrying it under the bar is no loss of the client's edits; `dropped`: the runs of
    messages of the prefix the cut left out (`[start, end)`), then `dropped_tokens` tokens;
    `rollout`: which rollout of the conversation's task the history is (`rollout`: the record keeps
    one cut per rollout, `guard.fit.temperature.Seen`); `room`: the room of the request the cut was
    made for (0: not recorded), which makes it again as it was on a turn with another room (a
    client that sets `max_tokens` turn by turn); `factor`: the calibration factor its counts are
    counted with (0: not recorded), which makes it again as it was after the deployment's factor
    changed (`calibration_mode: auto`, a counting miss); `since`: the messages of the history it was
    first sent with (0: not recorded): the turns of `since` to `history` messages carried it;
    `slid` and `window`: where a client slid a window of its newest messages past it (`guard.fit.slid`);
    with a summarizer, its summary's span digest and budget ("", 0: it sent none), the mark it was cut
    to and the room it left the summary (0: not recorded), by which a slid cut is made again (`HeldSummary`)."""

    length: int
    mark: int
    prefix_tokens: int
    history: int
    digest: str
    spine: str
    edited: bool = False
    under_bar: bool = False
    dropped: tuple[tuple[int, int], ...] = ()
    dropped_tokens: int = 0
    rollout: str = ""
    room: int = 0
    factor: float = 0.0
    since: int = 0
    slid: int = 0
    window: str = ""
    summary: str = ""
    summary_budget: int = 0
    summary_mark: int = 0
    summary_room: int = 0

    @classmethod
    def of(
        cls,
        dialect: Dialect,
        messages: Sequence[Mapping[str, Any]],
        counts: Sequence[int],
        cut: tuple[int, int],
        under_bar: bool = False,
        kept: Sequence[int] = (),
    ) -> LastCut:
        """The record of a cut of the first `cut[0]` of a history's messages (each `counts` tokens)
        to `cut[1]`, which sends the messages `kept` (their places in the history); its `room`, a
        field of its own (`made_for`)."""
        length, mark = cut
        digest, spine_ = counts_digest(counts), spine(dialect, messages, counts, length)
        dropped = _runs(sorted(set(range(length)) - set(kept))) if kept else ()
        tokens = sum(sum(counts[a:b]) for a, b in dropped)
        return cls(
            length,
            mark,
            sum(counts[:length]),
            len(counts),
            digest,
            spine_,
            False,
            under_bar,
            dropped,
            tokens,
            rollout(dialect, messages),
            since=len(counts),
            window=window(dropped, counts),
        )

    def made_for(self, room: int) -> LastCut:
        """This record, of a cut made for a request whose room was `room`."""
        return replace(self, room=room)

    def counted_with(self, factor: float) -> LastCut:
        """This record, its counts counted with the calibration factor `factor`."""
        return replace(self, factor=factor)

    def of_this(self, dialect: Dialect, messages: Sequence[Mapping[str, Any]], counts: Sequence[int]) -> bool:
        """Whether this record is of this history: of a history it grew from, or of one that went
        back to a turn it carried the cut on (`went_back`), the replies its cut was made on as they
        were (other shorter histories are another: the client's own compaction, or a body the guard
        already cut)."""
        return (self.history <= len(counts) or self.went_back(counts)) and spine(
            dialect, messages, counts, self.length
        ) == self.spine

    def went_back(self, counts: Sequence[int]) -> bool:
        """Whether `counts` are of a turn that carried this cut (`carried_by`) before the recorded
        one: a client went back (a rewind, a harness's retried step, an SDK's late retry)."""
        return self.carried_by(len(counts)) and len(counts) < self.history

    def carried_by(self, messages: int) -> bool:
        """Whether a turn of `messages` messages of this rollout carried this cut (those of `since`
        to `history`; of the cut's own `length` on where `since` is not recorded)."""
        return max(self.length, self.since) <= messages <= self.history

    def same_cut(self, other: LastCut) -> bool:
        """Whether `other` records this cut (of as many messages and tokens, mark, room and factor)."""
        return _cut_key(self) == _cut_key(other)

    def changed(self, counts: Sequence[int]) -> bool:
        """Whether the client changed messages of the recorded history (of this one, `of_this`;
        of one that went back, the messages the cut was made on: `went_back`)."""
        if len(counts) < self.history:  # (went back: the messages the cut was made on, as they were?)
            return self.taken(counts) != 0 or self.taken_from_dropped(counts) != 0
        return counts_digest(counts[: self.history]) != self.digest

    def taken(self, counts: Sequence[int]) -> int:
        """The tokens the client took out of what this cut's prefix keeps since the cut was made
        (less than none where its edits added; what it changed of the messages the cut leaves out
        does not count): the prefix is cut as if it were still as it was, so the same oldest turns
        go (`guard.fit.carried`)."""
        return self.prefix_tokens - sum(counts[: self.length]) - self.taken_from_dropped(counts)

    def taken_from_dropped(self, counts: Sequence[int]) -> int:
        """The tokens the client took out of the messages this cut left out since it was made."""
        return self.dropped_tokens - sum(sum(counts[a:b]) for a, b in self.dropped)

    @property
    def dropped_messages(self) -> frozenset[int]:
        """The places of the messages this cut left out."""
        return frozenset(i for a, b in self.dropped for i in range(a, b))

    def carried(self, counts: Sequence[int]) -> LastCut:
        """This cut, carried by a history (each message's `counts`) it is of (`of_this`: the spine
        is the same): recorded as made (its prefix's tokens then), in that history."""
        edited, digest, window_ = (
            self.edited or self.changed(counts),
            counts_digest(counts),
            window(self.dropped, counts),
        )
        return replace(self, history=len(counts), digest=digest, edited=edited, window=window_)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dropped": [list(r) for r in self.dropped]}

    @classmethod
    def from_dict(cls, data: Any) -> LastCut | None:
        """A record read back from the shared store (None: not one this version reads)."""
        fields = _fields(data)
        return cls(**fields) if fields is not None else None

    def of_rollout(self, rollout_: str) -> bool:
        """Whether this may be a record of the rollout `rollout_` (`rollout`: the same digest, or
        one unknown to either, a record made before the model's first reply)."""
        return not self.rollout or not rollout_ or self.rollout == rollout_


def _fields(data: Any) -> dict[str, Any] | None:
    """A record's fields, read back from the shared store and checked (`LastCut.from_dict`)."""
    if not isinstance(data, Mapping):
        return None
    ints: dict[str, Any] = {k: data.get(k) for k in _COUNTS} | {k: data.get(k, 0) for k in _LATER_COUNTS}
    texts: dict[str, Any] = {k: data.get(k) for k in ("digest", "spine")} | {k: data.get(k, "") for k in _TEXTS}
    flags: dict[str, Any] = {"edited": data.get("edited", False), "under_bar": data.get("under_bar", False)}
    runs, factor = data.get("dropped", []), data.get("factor", 0.0)
    if not all(map(is_count, ints.values())) or not all(isinstance(t, str) for t in texts.values()):
        return None
    if not is_factor(factor) or not all(isinstance(f, bool) for f in flags.values()) or not isinstance(runs, list):
        return None
    dropped = tuple(
        (int(r[0]), int(r[1])) for r in runs if isinstance(r, list) and len(r) == 2 and all(is_count(v) for v in r)
    )
    if len(dropped) != len(runs):
        return None
    return {**ints, **texts, **flags, "dropped": dropped, "factor": float(factor)}


def _cut_key(cut: LastCut) -> tuple[Any, ...]:
    """What tells a cut from another (`LastCut.same_cut`): made again for another room or with
    another factor, it is another (its prefix fits elsewhere)."""
    return (cut.length, cut.mark, cut.prefix_tokens, cut.room, cut.factor)


def windows_at(counts: Sequence[int], start: int, tail: int, places: Iterable[int]) -> Iterator[tuple[int, str]]:
    """For each of `places` where `tail` messages follow it, that place and the `counts_digest`
    of the counts before `start` and of those `tail` from it: the digest `window` gives a cut whose
    first dropped run starts at `start`, had its run ended there (`guard.fit.slid`). The counts
    before `start` are hashed once."""
    raw = memoryview(array("q", counts).tobytes())
    lead, size = hashlib.blake2b(raw[: start * _COUNT_BYTES], digest_size=8), _COUNT_BYTES
    for at in places:
        if at + tail <= len(counts):
            digest = lead.copy()
            digest.update(raw[at * size : (at + tail) * size])
            yield at, digest.hexdigest()


_COUNT_BYTES = array("q").itemsize  # (a count as `counts_digest` hashes it)


def window(dropped: Sequence[tuple[int, int]], counts: Sequence[int]) -> str:
    """The digest `guard.fit.slid.slid_to` finds a cut by (`LastCut.window`): the counts of the
    messages before its first dropped run and of those from its end on ("" where it drops nothing);
    `LastCut.slid`: the messages the client has taken out of that run since the cut was made, which
    its marker still counts."""
    if not dropped:
        return ""
    start, end = dropped[0]
    return counts_digest([*counts[:start], *counts[end:]])


def is_count(value: Any) -> TypeGuard[int]:
    """Whether a value read back from the shared record is a count (a non-negative int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_factor(value: Any) -> TypeGuard[float]:
    """Whether a value read back from the shared record is a calibration factor (a finite
    non-negative number, not a bool; 0: not recorded)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf


def _runs(indices: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Sorted indices as runs `[start, end)`."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return tuple(runs)
