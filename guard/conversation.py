"""The state strategies work on: the messages, their token counts and what each may be cut.

A `Conversation` is immutable; every edit returns a new one. Per message it keeps:
- `pinned`: never touched (system/developer messages, the first and last user turns, the guard's
  own markers);
- `recent`: in the newest `keep_recent_groups` turn groups, kept verbatim except by lossless steps;
- `group`: a tool call and its results share one group, so nothing ever splits them.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, fields, replace
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from guard.budget import quantized_stop
from guard.dialects import Content, Dialect, content_texts, group_messages
from guard.policy import STRATEGY_ORDER, Policy
from guard.report import Action, Skipped
from guard.tokens import TokenCounter

Message = Mapping[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class Conversation:
    dialect: Dialect
    messages: tuple[Message, ...]
    counts: tuple[int, ...]
    groups: tuple[int, ...]
    pinned: tuple[bool, ...]
    recent: tuple[bool, ...]
    fixed: int
    # per message: None if its count is exact, else an Estimate (the count is a guess until settled)
    pending: tuple[Estimate | None, ...] = ()
    # per message: its index in the request as sent by the client (-1 for the guard's markers)
    origin: tuple[int, ...] = ()

    @classmethod
    def build(
        cls,
        dialect: Dialect,
        messages: Sequence[Message],
        counts: Sequence[int],
        fixed: int,
        keep_recent_groups: int,
        keep_first_user_turn: bool = True,
    ) -> Conversation:
        groups = group_messages(dialect, messages)
        users = [i for i, m in enumerate(messages) if dialect.is_user_turn(m)]
        kept = {users[-1]} | ({users[0]} if keep_first_user_turn else set()) if users else set()
        pinned = tuple(dialect.is_system(m) or i in kept for i, m in enumerate(messages))
        ordinary = [g for g, m in zip(groups, messages) if not dialect.is_system(m)]
        newest = set(list(dict.fromkeys(reversed(ordinary)))[:keep_recent_groups])
        if messages and dialect.has_user_text(messages[-1]):
            newest.add(groups[-1])  # the user's words next to the newest results: that turn stays
        recent = tuple(g in newest for g in groups)
        n = len(messages)
        return cls(dialect, tuple(messages), tuple(counts), tuple(groups), pinned, recent, fixed, (None,) * n, tuple(range(n)))

    @property
    def total(self) -> int:
        return self._total  # type: ignore[attr-defined,no-any-return]  # set once in __post_init__

    def __post_init__(self) -> None:
        # strategies ask for the total before every candidate: compute it once per state
        object.__setattr__(self, "_total", self.fixed + sum(self.counts))

    def replacing(self, drop: set[int], markers: Mapping[int, tuple[Message, int]]) -> Conversation:
        """Remove the messages at `drop`; a marker (message, count) takes the place of index i."""
        cols: list[list[Any]] = [[], [], [], [], [], [], []]
        rows = zip(self.messages, self.counts, self.groups, self.pinned, self.recent, self.pending, self.origin)
        for i, row in enumerate(rows):
            if i in markers:
                msg, count = markers[i]
                for col, value in zip(cols, (msg, count, row[2], True, row[4], None, -1)):
                    col.append(value)
            if i not in drop:
                for col, value in zip(cols, row):
                    col.append(value)
        msgs, counts, groups, pinned, recent, pending, origin = (tuple(c) for c in cols)
        return replace(
            self, messages=msgs, counts=counts, groups=groups, pinned=pinned, recent=recent, pending=pending, origin=origin
        )

    def settled(self, ctx: Context) -> Conversation:
        """Every estimated count replaced by the exact one. A rewrite whose exact count is not
        below the last exactly counted version is undone (input tokens never grow); the
        estimate's error is moved onto the strategies that made the rewrites, so the report's
        savings add up exactly."""
        msgs, counts, pending = list(self.messages), list(self.counts), list(self.pending)
        todo = [(i, est) for i, est in enumerate(self.pending) if est is not None]
        exacts = ctx.counter.messages(self.dialect, [self.messages[i] for i, _ in todo])  # one batch
        for (i, est), exact in zip(todo, exacts):
            pending[i] = None
            if exact >= est.base_count:
                msgs[i], counts[i] = est.base, est.base_count
                for kind, saved in est.savings:
                    ctx.adjust(kind, -saved, -1)
                continue
            counts[i] = exact
            error = self.counts[i] - exact  # what the estimate credited too little (or, < 0, too much)
            share = sum(saved for _, saved in est.savings) or 1
            remaining = error
            for n, (kind, saved) in enumerate(est.savings):
                part = remaining if n == len(est.savings) - 1 else error * saved // share
                ctx.adjust(kind, part, 0)
                remaining -= part
        return replace(self, messages=tuple(msgs), counts=tuple(counts), pending=tuple(pending))

    def tool_slots(self, *, recent: bool) -> Iterator[tuple[int, int | None, Content]]:
        """(message index, slot, content) of tool results, oldest first; recent ones only if asked."""
        for i, msg in enumerate(self.messages):
            if self.pinned[i] or (self.recent[i] and not recent):
                continue
            for slot, content in self.dialect.tool_results(msg):
                yield i, slot, content


_ORDER: dict[str, int] = {name: i for i, name in enumerate(STRATEGY_ORDER)}


@dataclass(frozen=True)
class Estimate:
    """A message whose count is estimated: the last exactly counted version, and what each
    strategy that rewrote it since was credited."""

    base: Message
    base_count: int
    savings: tuple[tuple[str, int], ...]


@dataclass
class Context:
    """What a strategy reads besides the conversation, and where it writes what it did.

    With `estimate` on, lossless rewrites (JSON compaction, metadata removal, item dedupe) are
    counted by estimate and settled exactly once at the end of the round: most of what they
    rewrite in a large overflow is truncated or dropped later, and encoding it all again is the
    most expensive part of a fit."""

    counter: TokenCounter
    policy: Policy
    stop_at: int
    floor: int = 0  # cutting below this wastes the window (see Budget.floor)
    room: int = 0  # the most input tokens the request may carry (see Budget.room)
    target: int = 0  # the low-water mark (see Budget.target)
    band: int = 1  # the quantum cuts move in (see Budget.band)
    ceiling: int | None = None  # a stop mark no step may move above (a carried cut's, see planner._carried)
    least: int = 0  # a carried cut's bottom: a drop that would leave less is passed over when later turns can do
    # near-lossless rewrites run on every overflow, past the stop mark (one form per message, turn
    # after turn); a carried cut's prefix is fitted once per band and only as far as its mark
    every_overflow: bool = True
    estimate: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    exhausted: set[str] = field(default_factory=set)
    # origin indices of the messages the last user message is about, among those not summarized
    # (called with the summarized span's indices and the last index of each whole band, see
    # `_band_edges`; computed on first use per span)
    relevance: Callable[[frozenset[int], tuple[int, ...]], frozenset[int]] | None = None
    summary: dict[str, Any] | None = None  # what the summarize step got: source, calls, span sizes
    summary_message: Message | None = None  # the summary in the conversation, and its span
    summary_span: list[int] | None = None
    summaries: dict[int, tuple[str, str]] = field(default_factory=dict)  # span index -> (text, source)
    summary_calls: int = 0
    originals: tuple[Message, ...] = ()  # the request's messages and their counts, as sent
    original_counts: tuple[int, ...] = ()
    transcript: Callable[[], list[str]] | None = None  # the originals' transcript lines, rendered once
    requests: dict[tuple[int, ...], Any] = field(default_factory=dict)  # summary request per span, built once
    _totals: dict[str, list[int]] = field(default_factory=dict)
    _cumulative: list[int] = field(default_factory=list)
    # dedupe: (origin, slot) of a later copy replaced by a marker -> (origin, slot) of the first copy
    duplicate_of: dict[tuple[int, int | None], tuple[int, int | None]] = field(default_factory=dict)
    _relevant: dict[frozenset[int], frozenset[int]] = field(default_factory=dict)

    def snapshot(self) -> Context:
        """A copy whose mutable parts are copies too (see `restore`)."""
        return replace(
            self,
            skipped=list(self.skipped),
            exhausted=set(self.exhausted),
            summary=dict(self.summary) if self.summary is not None else None,
            summary_span=list(self.summary_span) if self.summary_span is not None else None,
            summaries=dict(self.summaries),
            duplicate_of=dict(self.duplicate_of),
            _totals={k: list(v) for k, v in self._totals.items()},
        )

    def restore(self, saved: Context) -> None:
        """Put this context back in the state `saved` (a snapshot) recorded."""
        copy = saved.snapshot()
        for f in fields(self):
            if f.name not in ("_relevant", "relevance"):
                setattr(self, f.name, getattr(copy, f.name))

    def relevant(self) -> frozenset[int]:
        """What the question is about among the messages still in the conversation: the same set
        whether the summary standing for older messages was just made or came from the cache."""
        if self.relevance is None:
            return frozenset()
        span = frozenset(self.summary_span or ())
        hit = self._relevant.get(span)
        if hit is None:
            hit = self._relevant[span] = self.relevance(span, self._band_edges())
        return hit

    def _band_edges(self) -> tuple[int, ...]:
        """The last original index of each whole band of the history, oldest first: the messages
        at or below the low-water mark, then each band above it, up to `_settled_end`."""
        ends = self._ends()
        last = self._settled_end()
        if not ends or ends[-1] <= self.target:
            return (last,)
        edges: list[int] = []
        mark = self.target
        while True:
            edge = min(last, bisect.bisect_right(ends, mark) - 1)
            if not edges or edge > edges[-1]:
                edges.append(edge)
            if edge >= last:
                return tuple(e for e in edges if e >= 0) or (last,)
            mark += max(1, self.band)

    def _settled_end(self) -> int:
        """The last original index of the history in whole bands (cumulative original tokens at
        or below the total, rounded down to the low-water mark plus a whole number of bands):
        relevance is scored among those messages only, so its statistics, and the order it gives
        a cut, change once per band of growth, not with every new message."""
        ends = self._ends()
        if not ends or ends[-1] <= self.target:  # (the pinned prompt and tools make the overflow)
            return len(ends) - 1
        return bisect.bisect_right(ends, ends[-1] - (ends[-1] - self.target) % max(1, self.band)) - 1

    def relevant_last(self, items: Iterable[T], origins: Callable[[T], Iterable[int]]) -> list[T]:
        """`items` (oldest first) with those the question is about moved to the back, each part
        still oldest first: what the question asks about is cut last."""
        items = list(items)
        if self.relevance is None:
            return items
        hot = self.relevant()
        if not hot:
            return items
        marked = [any(o in hot for o in origins(item)) for item in items]
        return [x for x, m in zip(items, marked) if not m] + [x for x, m in zip(items, marked) if m]

    def settled_slots(
        self, conv: Conversation, slots: Iterable[tuple[int, int | None, Content]]
    ) -> list[tuple[int, int | None, Content]]:
        """The slots of older messages that lie in whole quanta of the history: a message that just
        left the newest turns waits until the older history has grown by a full band past the
        last quantum boundary, then all of them are taken at once. Steps that edit older messages
        then move their edge once per band, not once per turn (each move re-sends, uncached,
        everything after it)."""
        slots = list(slots)
        if not slots or not self.original_counts:
            return slots
        ends = self._ends()
        newest = max((o for o, r in zip(conv.origin, conv.recent) if o >= 0 and not r), default=-1)
        if newest < 0:
            return []
        limit = ends[newest] - ends[newest] % self.band
        return [s for s in slots if 0 <= conv.origin[s[0]] and ends[conv.origin[s[0]]] <= limit]

    def settled_first(
        self,
        conv: Conversation,
        slots: Iterable[tuple[int, int | None, Content]],
        step: Callable[[list[tuple[int, int | None, Content]]], Conversation],
    ) -> Conversation:
        """Run `step` on the settled slots (see `settled_slots`); only if that leaves the request
        over its mark while the newer older messages would bring it there, on all of them (a
        single request whose one big result just left the newest turns is still fitted)."""
        slots = list(slots)
        settled = self.settled_slots(conv, slots)
        if len(settled) == len(slots):
            return step(slots)
        saved = self.snapshot()
        out = step(settled)
        if self.done(out):
            return out
        tail = {s[0] for s in slots} - {s[0] for s in settled}
        if out.total - sum(out.counts[i] for i in tail) > self.stop_at:
            return out  # even removing those messages whole would not do: no need to try
        after_settled = self.snapshot()
        self.restore(saved)
        full = step(slots)
        if self.done(full):
            return full
        self.restore(after_settled)
        return out

    def _ends(self) -> list[int]:
        """Cumulative original tokens through each message of the request as sent."""
        if len(self._cumulative) != len(self.original_counts):
            total, out = 0, []
            for n in self.original_counts:
                total += n
                out.append(total)
            self._cumulative = out
        return self._cumulative

    def requantize(self, conv: Conversation) -> None:
        """Before a step: its stop mark is the conversation's total minus the overflow above the
        low-water mark rounded up to whole bands. The amount a step cuts then changes only when
        the total crosses a band, so a growing conversation keeps the same cut, turn after turn,
        whatever the steps before it saved on newer messages."""
        self.stop_at = quantized_stop(conv.total, self.target, self.band)
        if self.ceiling is not None:
            self.stop_at = min(self.stop_at, self.ceiling)
        self.floor = self.stop_at - self.band
        if self.least < self.stop_at:
            self.floor = max(self.floor, self.least)

    def done(self, conv: Conversation) -> bool:
        return conv.total <= self.stop_at

    def record(self, kind: str, saved: int, items: int) -> None:
        if items:
            self.adjust(kind, saved, items)

    def adjust(self, kind: str, saved: int, items: int) -> None:
        total = self._totals.setdefault(kind, [0, 0])
        total[0] += saved
        total[1] += items

    @property
    def actions(self) -> list[Action]:
        """What each strategy did, in strategy order (least destructive first)."""
        done = [Action(kind, saved, items) for kind, (saved, items) in self._totals.items() if items > 0]
        return sorted(done, key=lambda a: _ORDER.get(a.kind, len(_ORDER)))


@dataclass(frozen=True)
class ToolResult:
    """One tool result as a strategy sees it."""

    index: int  # message index
    slot: int | None  # block index (Anthropic) or None (OpenAI tool message)
    content: Content
    message_tokens: int  # the whole message's count: an upper bound of the content's tokens
    over: int  # tokens still to save to reach the stop mark


def rewrite_tool_results(
    conv: Conversation,
    ctx: Context,
    kind: str,
    slots: Iterable[tuple[int, int | None, Content]],
    transform: Callable[[ToolResult], Content],
    *,
    lossless: bool = False,
    exhaustive: bool = False,
) -> Conversation:
    """Apply `transform` to tool results in order until the conversation is at the stop mark.

    A rewrite is kept only if it lowers the message's count, so input tokens never grow.
    `transform` returns the same content object to leave a result alone. `lossless` rewrites
    are counted by estimate when the context allows (see Context). `exhaustive` rewrites every
    slot, past the stop mark (for a pure per-message rewrite: each message then has one form for
    as long as the conversation is over its room, turn after turn).
    """
    dialect = conv.dialect
    msgs, counts, pending = list(conv.messages), list(conv.counts), list(conv.pending)
    chars: dict[int, int] = {}  # tool-result characters of messages rewritten so far (see _estimated)
    total = conv.total
    saved = items = 0
    stopped = False
    # edits go to local lists (one new Conversation at the end); an edit replaces only its own slot,
    # so the content listed for every other slot stays current
    for i, slot, content in list(slots):
        if total <= ctx.stop_at and not exhaustive:
            stopped = True
            break
        current = msgs[i]
        new_content = transform(ToolResult(i, slot, content, counts[i], total - ctx.stop_at))
        if new_content is content:
            continue
        new_msg = dialect.with_tool_result(current, slot, new_content)
        estimate = None
        if lossless and ctx.estimate:
            old_chars = chars[i] if i in chars else tool_chars(dialect, current)
            new_chars = old_chars - _texts_chars(content) + _texts_chars(new_content)
            count = _estimated(counts[i], old_chars, new_chars)
            prior = pending[i] or Estimate(current, counts[i], ())
            estimate = Estimate(prior.base, prior.base_count, prior.savings + ((kind, counts[i] - count),))
        else:
            count = ctx.counter.message(dialect, new_msg)
        if count >= counts[i]:
            continue
        if lossless and ctx.estimate:
            chars[i] = new_chars
        saved += counts[i] - count
        items += 1
        total -= counts[i] - count
        msgs[i], counts[i], pending[i] = new_msg, count, estimate
    if not stopped:
        ctx.exhausted.add(kind)  # every candidate was seen: another round would find nothing new
    ctx.record(kind, saved, items)
    if not items:
        return conv
    return replace(conv, messages=tuple(msgs), counts=tuple(counts), pending=tuple(pending))


def tool_chars(dialect: Dialect, msg: Message) -> int:
    """The characters of a message's tool results (plus a constant for the rest): what scales an
    estimated count when a rewrite changes only those."""
    return sum(_texts_chars(content) for _, content in dialect.tool_results(msg)) + 16


def _texts_chars(content: Content) -> int:
    return sum(len(t) for t in content_texts(content))


# Scaling a count by the text length left over-states a compacted JSON result by 2-3% on average
# (up to 9%: whitespace and metadata keys cost more tokens per character than the text that stays),
# and over-stated counts make a round cut more than it needs. 0.95 makes the estimate optimistic on
# average: the settled round then usually falls a little short, and the exact round 2 finishes.
_ESTIMATE_SCALE = 0.95


def _estimated(count: int, old_chars: int, new_chars: int) -> int:
    """The new message's count, scaled by its tool-result text length (`_chars`; an estimate)."""
    return max(1, math.floor(_ESTIMATE_SCALE * count * new_chars / old_chars))
