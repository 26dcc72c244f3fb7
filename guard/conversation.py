"""The state strategies work on: the messages, their token counts and what each may be cut.

A `Conversation` is immutable; every edit returns a new one. Per message it keeps:
- `pinned`: never touched (system/developer messages, the first and last user turns, the guard's
  own markers);
- `recent`: in the newest `keep_recent_groups` turn groups, kept verbatim except by lossless steps;
- `group`: a tool call and its results share one group, so nothing ever splits them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from guard.dialects import Content, Dialect, group_messages
from guard.policy import Policy
from guard.report import Action, Skipped
from guard.tokens import TokenCounter

Message = Mapping[str, Any]


@dataclass(frozen=True)
class Conversation:
    dialect: Dialect
    messages: tuple[Message, ...]
    counts: tuple[int, ...]
    groups: tuple[int, ...]
    pinned: tuple[bool, ...]
    recent: tuple[bool, ...]
    fixed: int

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
        recent = tuple(g in newest for g in groups)
        return cls(dialect, tuple(messages), tuple(counts), tuple(groups), pinned, recent, fixed)

    @property
    def total(self) -> int:
        return self.fixed + sum(self.counts)

    def with_message(self, i: int, msg: Message, count: int) -> Conversation:
        return replace(
            self,
            messages=self.messages[:i] + (msg,) + self.messages[i + 1 :],
            counts=self.counts[:i] + (count,) + self.counts[i + 1 :],
        )

    def replacing(self, drop: set[int], markers: Mapping[int, tuple[Message, int]]) -> Conversation:
        """Remove the messages at `drop`; a marker (message, count) takes the place of index i."""
        cols: list[list[Any]] = [[], [], [], [], []]
        for i, row in enumerate(zip(self.messages, self.counts, self.groups, self.pinned, self.recent)):
            if i in markers:
                msg, count = markers[i]
                for col, value in zip(cols, (msg, count, row[2], True, row[4])):
                    col.append(value)
            if i not in drop:
                for col, value in zip(cols, row):
                    col.append(value)
        msgs, counts, groups, pinned, recent = (tuple(c) for c in cols)
        return replace(self, messages=msgs, counts=counts, groups=groups, pinned=pinned, recent=recent)

    def tool_slots(self, *, recent: bool) -> Iterator[tuple[int, int | None, Content]]:
        """(message index, slot, content) of tool results, oldest first; recent ones only if asked."""
        for i, msg in enumerate(self.messages):
            if self.pinned[i] or (self.recent[i] and not recent):
                continue
            for slot, content in self.dialect.tool_results(msg):
                yield i, slot, content


@dataclass
class Context:
    """What a strategy reads besides the conversation, and where it writes what it did."""

    counter: TokenCounter
    policy: Policy
    stop_at: int
    actions: list[Action] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def done(self, conv: Conversation) -> bool:
        return conv.total <= self.stop_at

    def record(self, kind: str, saved: int, items: int) -> None:
        if items:
            self.actions.append(Action(kind=kind, tokens_saved=saved, items=items))


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
) -> Conversation:
    """Apply `transform` to tool results in order until the conversation is at the stop mark.

    A rewrite is kept only if it lowers the message's count, so input tokens never grow.
    `transform` returns the same content object to leave a result alone.
    """
    saved = items = 0
    for i, slot, _ in list(slots):
        if ctx.done(conv):
            break
        current = conv.messages[i]
        content = _slot_content(conv.dialect, current, slot)
        new_content = transform(ToolResult(i, slot, content, conv.counts[i], conv.total - ctx.stop_at))
        if new_content is content:
            continue
        new_msg = conv.dialect.with_tool_result(current, slot, new_content)
        count = ctx.counter.message(conv.dialect, new_msg)
        if count >= conv.counts[i]:
            continue
        saved += conv.counts[i] - count
        items += 1
        conv = conv.with_message(i, new_msg, count)
    ctx.record(kind, saved, items)
    return conv


def _slot_content(dialect: Dialect, msg: Message, slot: int | None) -> Content:
    for s, content in dialect.tool_results(msg):
        if s == slot:
            return content
    return None
