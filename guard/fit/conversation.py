"""The state strategies work on: the messages, their token counts and what each may be cut.

A `Conversation` is immutable; every edit returns a new one. Per message it keeps:
- `pinned`: never touched (system/developer messages, the first and last user turns, the guard's
  own markers; the assistant's words a long last user message answers while the agent works after
  it, see `Keeping.answered`);
- `recent`: in the newest `keep_recent_groups` turn groups (as many of them as take at most
  `keep_recent_share` of the room the pinned messages leave, the newest with content always; not
  the words a newest long user message answers where they are too large to pin beside it, see
  `Keeping.answered`), kept verbatim except by lossless steps;
- `group`: a tool call and its results share one group, so nothing ever splits them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from guard.core.budget import Budget
from guard.core.policy import Policy
from guard.core.report import Action, Skipped
from guard.core.tokens import TokenCounter
from guard.dialects import Content, Dialect, group_messages
from guard.fit.answered import ANSWERED_HELD, answered
from guard.fit.history import History
from guard.fit.ledger import Ledger
from guard.fit.marks import Marks
from guard.fit.replay import task_messages
from guard.fit.summary import Summaries

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
        keeping: Keeping,
    ) -> Conversation:
        """The conversation of a request's messages, with what `keeping` pins and keeps recent."""
        groups = group_messages(dialect, messages)
        users = [i for i, m in enumerate(messages) if dialect.is_user_turn(m)]
        kept = {users[-1]} if users else set()
        if users and keeping.first_user_turn:
            task_end = len(messages) if keeping.task_before is None else keeping.task_before
            kept.update(i for i in task_messages(dialect, messages) if i < task_end)
            # what leads the task without calls or results (an agent's greeting) goes with it: dropping
            # it saves nothing a marker would not take back, and it moves the cut before the task
            kept.update(
                i
                for i in range(users[0])
                if not dialect.tool_call_ids(messages[i]) and not dialect.tool_result_ids(messages[i])
            )
        system = [dialect.is_system(m) for m in messages]
        last = users[-1] if users else 0
        outgrown, limits = None, keeping.answered  # (outgrown: the group of words too large to pin)
        before = messages[last - 1] if limits is not None and last > 0 else None
        acts = before is not None and (dialect.tool_call_ids(before) or dialect.tool_result_ids(before))
        if limits is not None and before is not None and not (acts or system[last - 1] or dialect.is_user_turn(before)):
            pin, grown = answered(counts, fixed, system, kept, last, limits)  # (the assistant's words alone)
            kept |= pin
            outgrown = groups[last - 1] if grown else None
        pinned = tuple(s or i in kept for i, s in enumerate(system))
        ordinary = [g for g, s in zip(groups, system) if not s and g != outgrown]
        order = list(dict.fromkeys(reversed(ordinary)))[: keeping.recent_groups]
        recent_room = keeping.recent_room
        if recent_room is not None and len(order) > 1:
            size: dict[int, int] = {}
            for g, n, p in zip(groups, counts, pinned):
                size[g] = size.get(g, 0) + (0 if p else n)
            room, share, floor = recent_room
            held = fixed + sum(n for n, p in zip(counts, pinned) if p)
            left = min(share * (room - held), floor - held)
            taken = 0
            for i, g in enumerate(order):
                # (the newest group with content always stays; not an older one in place of outgrown words)
                if (taken or outgrown is not None) and taken + size.get(g, 0) > left:
                    order = order[:i]
                    break
                taken += size.get(g, 0)
        newest = set(order)
        if messages and dialect.has_user_text(messages[-1]):
            newest.add(groups[-1])  # the user's words next to the newest results: that turn stays
        recent = tuple(g in newest for g in groups)
        n = len(messages)
        return cls(
            dialect, tuple(messages), tuple(counts), tuple(groups), pinned, recent, fixed, (None,) * n, tuple(range(n))
        )

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
            self,
            messages=msgs,
            counts=counts,
            groups=groups,
            pinned=pinned,
            recent=recent,
            pending=pending,
            origin=origin,
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


@dataclass(frozen=True)
class Estimate:
    """A message whose count is estimated: the last exactly counted version, and what each
    strategy that rewrote it since was credited."""

    base: Message
    base_count: int
    savings: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Outcome:
    """What a strategy made of a conversation: the new conversation, the ledger of what it did
    (entries to append to the fit's) and the marks it leaves (a drop can raise the stop mark).
    A strategy never writes to the context it is given (see `Context.outcome` and `take`)."""

    conv: Conversation
    ledger: Ledger
    marks: Marks


@dataclass
class Context:
    """What a strategy reads besides the conversation, and where the fit keeps what the steps did.

    With `estimate` on, lossless rewrites (JSON compaction, metadata removal, item dedupe) are
    counted by estimate and settled exactly once at the end of the round: most of what they
    rewrite in a large overflow is truncated or dropped later, and encoding it all again is the
    most expensive part of a fit."""

    counter: TokenCounter
    policy: Policy
    marks: Marks  # what to cut to (immutable: a step that moves them puts new marks here)
    estimate: bool = False
    ledger: Ledger = field(default_factory=Ledger)  # what the steps did and skipped (append-only)
    summarized: Summaries = field(default_factory=Summaries)  # what the fit knows of its summaries
    history: History = field(default_factory=History)  # the messages as sent, read-only
    note: dict[str, int] | None = None  # the note a carried cut got (`guard.fit.notes.Note.report`)
    carry_room: int | None = None  # the room checked instead of the budget's (`Resolved.checked_room`)

    @property
    def exhausted(self) -> set[str]:
        return self.ledger.exhausted

    @property
    def duplicate_of(self) -> dict[tuple[int, int | None], tuple[int, int | None]]:
        return self.ledger.duplicate_of

    def trial(self, summaries: bool = False) -> Context:
        """This context for steps tried tentatively: the same marks and history, a ledger of its
        own (no entries yet; what is known exhausted and deduplicated so far) and, with
        `summaries`, a copy of the summary state (see `commit`). A trial whose result does not
        stand is dropped: this context never has to be rolled back."""
        ledger = Ledger(exhausted=set(self.exhausted), duplicate_of=dict(self.duplicate_of))
        return replace(self, ledger=ledger, summarized=self.summarized.copy() if summaries else self.summarized)

    def commit(self, trial: Context) -> None:
        """The tried steps' result stands: append what they recorded, take the marks (and the
        summary state) they left."""
        self.ledger.extend(trial.ledger)
        self.marks, self.summarized, self.estimate = trial.marks, trial.summarized, trial.estimate

    def own(self) -> Context:
        """This context for one strategy: a ledger of its own (see `trial`), returned in its
        `outcome`, so the strategy never writes to the fit's."""
        return self.trial()

    def outcome(self, conv: Conversation) -> Outcome:
        """A strategy's result: `conv` and what this (its own) context recorded."""
        return Outcome(conv, self.ledger, self.marks)

    def take(self, out: Outcome) -> Conversation:
        """Append a strategy's ledger to this context's, take the marks it left; its conversation."""
        self.ledger.extend(out.ledger)
        self.marks = out.marks
        return out.conv

    def relevant_last(self, items: Iterable[T], origins: Callable[[T], Iterable[int]]) -> list[T]:
        """`items` (oldest first) with those the question is about moved to the back (see
        `History.relevant_last`)."""
        return self.history.relevant_last(items, origins, frozenset(self.summarized.span or ()), self.target, self.band)

    def settled_slots(
        self, conv: Conversation, slots: Iterable[tuple[int, int | None, Content]]
    ) -> list[tuple[int, int | None, Content]]:
        """The slots of older messages that lie in whole quanta of the history (see `History.settled_slots`)."""
        return self.history.settled_slots(conv.origin, conv.recent, slots, self.band)

    def settled_first(
        self,
        conv: Conversation,
        slots: Iterable[tuple[int, int | None, Content]],
        step: Callable[[Context, list[tuple[int, int | None, Content]]], Conversation],
    ) -> Conversation:
        """Run `step` (with the context it writes to) on the settled slots (see `settled_slots`);
        only if that leaves the request over its mark while the newer older messages would bring
        it there, on all of them (a single request whose one big result just left the newest
        turns is still fitted). Both are tried on a `trial` of this context; the one that stands
        is committed."""
        slots = list(slots)
        settled = self.settled_slots(conv, slots)
        if len(settled) == len(slots):
            return step(self, slots)
        first = self.trial()
        out = step(first, settled)
        tail = {s[0] for s in slots} - {s[0] for s in settled}
        # (even removing those newer messages whole would not do: no need to try)
        if self.done(out) or out.total - sum(out.counts[i] for i in tail) > self.stop_at:
            self.commit(first)
            return out
        second = self.trial()
        full = step(second, slots)
        if self.done(full):
            self.commit(second)
            return full
        self.commit(first)
        return out

    def requantize(self, conv: Conversation) -> None:
        """Before a step: the marks requantized to the conversation's total (see `Marks.requantized`)."""
        self.marks = self.marks.requantized(conv.total)

    # the marks, read-only (see Marks)
    @property
    def stop_at(self) -> int:
        return self.marks.stop_at

    @property
    def floor(self) -> int:
        return self.marks.floor

    @property
    def room(self) -> int:
        return self.marks.room

    @property
    def target(self) -> int:
        return self.marks.target

    @property
    def band(self) -> int:
        return self.marks.band

    @property
    def ceiling(self) -> int | None:
        return self.marks.ceiling

    @property
    def least(self) -> int:
        return self.marks.least

    @property
    def every_overflow(self) -> bool:
        return self.marks.every_overflow

    def done(self, conv: Conversation) -> bool:
        return conv.total <= self.stop_at

    def record(self, kind: str, saved: int, items: int) -> None:
        self.ledger.record(kind, saved, items)

    def adjust(self, kind: str, saved: int, items: int) -> None:
        self.ledger.adjust(kind, saved, items)

    @property
    def skipped(self) -> list[Skipped]:
        return self.ledger.skipped

    @property
    def actions(self) -> list[Action]:
        """What each strategy did, in strategy order (least destructive first)."""
        return self.ledger.actions


@dataclass(frozen=True)
class Keeping:
    """What `Conversation.build` pins and keeps recent: the newest `recent_groups` turn groups
    (kept whole while they take at most `recent_room[1]` of what the fixed tokens and pinned
    messages leave of the room `recent_room[0]`, and leave those, the pinned messages and the kept
    groups under `recent_room[2]`, the band's bottom), and the first user turn if `first_user_turn`.
    The newest group with content is always kept."""

    recent_groups: int
    first_user_turn: bool = True
    recent_room: tuple[int, float, int] | None = None
    # (least, most): a last user message of at least `least` tokens, with the agent's steps after
    # it, pins the assistant's words it answers (the message just before it) where the pinned
    # messages with them take at most `most`: with both kept, a new cut drops the steps after them
    # and the provider's cache holds through the long message (a pasted log of 45k tokens, re-sent
    # uncached when a cut dropped the message before it: bench.sweep's held-out Qwen Code and
    # Cursor chats, session 62); None: not pinned. Where that message is the newest and the words
    # would take over `most` with it, they are not kept as the newest turn either: the first cut
    # drops them, where the next one would have and sent the long message again uncached (the
    # held-out Cursor chat at 50%, session 63)
    answered: tuple[int, int] | None = None
    # where a carried cut's first dropped run starts in a history the client edited since: the task
    # is before it (a client that slid a window of its newest messages may leave one that was an
    # answer, a text agent's observation sent as a user message, right after the task, where
    # `task_messages` would read it as the task's request: pinned, it moves the cut)
    task_before: int | None = None

    @classmethod
    def of(cls, policy: Policy, budget: Budget) -> Keeping:
        """What the policy keeps in this budget's room: where the pinned messages take most of it
        (a long system prompt), the groups kept whole still leave a cut room for a band of growth,
        so it lasts a band and not a turn or two (bench.cache: tau2, SWE-agent 0.x)."""
        share, long_user = policy.keep_recent_share, policy.keep_answered_share
        return cls(
            policy.keep_recent_groups,
            policy.keep_first_user_turn,
            None if share is None else (budget.room, share, budget.floor),
            None if long_user is None else (int(long_user * budget.room), int(ANSWERED_HELD * budget.room)),
        )
