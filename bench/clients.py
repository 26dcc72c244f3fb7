"""What agents do to their own history before each request, for `bench.cache` to replay: not every
client only appends. Each processor takes a request's messages (in its dialect) and returns them as
that client would send them; the replay applies it to every turn, the untrimmed loop's too.

- `last_n_observations`: SWE-agent's history processor of that name (its 0.7 configs and others:
  `type: last_n_observations, n: 5`): every tool result but the newest `n` becomes
  "Old environment output: (k lines omitted)", so a result changes once, `n` turns after it came.
- `sliding`: a window of the newest `n` messages after the system prompt and the first user
  message (AutoGen's `BufferedChatCompletionContext`, LangChain's `trim_messages` with
  `strategy="last"`, OpenHands' `RecentEventsCondenser` with `keep_first`): every turn past `n`
  drops the oldest messages of the history, so the untrimmed loop's cached prefix ends at the task
  on every turn; it never starts on a tool result (its call went).
- `trimmed`: a window of the newest messages within `n` thousand tokens (estimated as a quarter of
  their JSON's characters, LangChain's `count_tokens_approximately`) after the system prompt and the
  first user message (LangChain's `trim_messages(max_tokens=..., strategy="last")` with the task
  kept, LlamaIndex's `ChatMemoryBuffer(token_limit=...)`): how many messages go each turn follows
  the sizes of the ones that came, so a turn may slide past many.
- `middle`: AutoGen's `TokenLimitedChatCompletionContext(token_limit=n thousand)`: while the
  history is over its limit, the message in its middle goes; then a leading tool result goes. The
  head it keeps grows and shrinks by a message as the sizes move, so the client's own prefix breaks
  in the middle of its history, not after the task.
- `breakpoints`: a prompt-cache breakpoint (`cache_control`) on the newest `n` user or tool
  messages, moved every turn (SWE-agent's `cache_control` processor, Claude Code, LiteLLM's
  `cache_control_injection_points`).

`CLIENTS` names them for the command line: `python -m bench.cache --client last_n_observations:5`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from guard.core.content import blocks
from guard.dialects import Dialect

Message = Mapping[str, Any]
Client = Callable[[Dialect, Sequence[Message]], list[Message]]


def _lines(content: Any) -> int:
    if isinstance(content, str):
        return len(content.splitlines())
    if isinstance(content, list):
        return sum(_lines(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return 0


def last_n_observations(n: int) -> Client:
    def client(dialect: Dialect, messages: Sequence[Message]) -> list[Message]:
        results = [(i, slot) for i, m in enumerate(messages) for slot, _ in dialect.tool_results(m)]
        out = list(messages)
        for i, slot in results[: max(0, len(results) - n)]:
            content = dict(dialect.tool_results(out[i]))[slot]
            stub = f"Old environment output: ({_lines(content)} lines omitted)"
            out[i] = dialect.with_tool_result(out[i], slot, stub)
        return out

    return client


def sliding(n: int) -> Client:
    def client(dialect: Dialect, messages: Sequence[Message]) -> list[Message]:
        first = next((i for i, m in enumerate(messages) if dialect.is_user_turn(m)), None)
        if first is None or len(messages) - first - 1 <= n:
            return list(messages)
        return [*messages[: first + 1], *messages[_starts_on_reply(dialect, messages, len(messages) - n) :]]

    return client


def estimated(msg: Message) -> int:
    """A message's tokens as these clients estimate them: a quarter of its JSON's characters, and 3."""
    return len(json.dumps(msg, ensure_ascii=False)) // 4 + 3


def _starts_on_reply(dialect: Dialect, messages: Sequence[Message], start: int) -> int:
    while start < len(messages) - 1 and (
        dialect.tool_result_ids(messages[start])
        or not (dialect.is_user_turn(messages[start]) or dialect.is_reply(messages[start]))
    ):
        start += 1
    return start


def trimmed(n: int) -> Client:
    return within(n * 1000)


def within(budget: int) -> Client:
    """`trimmed` with a budget of `budget` tokens (estimated)."""

    def client(dialect: Dialect, messages: Sequence[Message]) -> list[Message]:
        first = next((i for i, m in enumerate(messages) if dialect.is_user_turn(m)), None)
        if first is None:
            return list(messages)
        left, start = budget - sum(estimated(m) for m in messages[: first + 1]), len(messages)
        while start > first + 1 and (size := estimated(messages[start - 1])) <= left:
            start, left = start - 1, left - size
        if start == first + 1:
            return list(messages)
        return [*messages[: first + 1], *messages[_starts_on_reply(dialect, messages, start) :]]

    return client


def middle(n: int) -> Client:
    budget = n * 1000

    def client(dialect: Dialect, messages: Sequence[Message]) -> list[Message]:
        out = list(messages)
        sizes = [estimated(m) for m in out]
        total = sum(sizes)
        while total > budget and out:
            gone = len(out) // 2
            total -= sizes.pop(gone)
            out.pop(gone)
        return out[1:] if out and dialect.tool_result_ids(out[0]) else out

    return client


def _marked(msg: Message) -> dict[str, Any]:
    content = msg.get("content")
    parts = (
        [{"type": "text", "text": content}] if isinstance(content, str) and content else [dict(b) for b in blocks(msg)]
    )
    if not parts:
        return dict(msg)
    parts[-1]["cache_control"] = {"type": "ephemeral"}
    return {**msg, "content": parts}


def breakpoints(n: int) -> Client:
    def client(dialect: Dialect, messages: Sequence[Message]) -> list[Message]:
        out = list(messages)
        if dialect.name == "responses":
            return out  # (no breakpoints on the Responses API)
        asks = [i for i, m in enumerate(out) if m.get("role") in ("user", "tool")]
        for i in asks[-n:]:
            out[i] = _marked(out[i])
        return out

    return client


CLIENTS: dict[str, Callable[[int], Client]] = {
    "last_n_observations": last_n_observations,
    "breakpoints": breakpoints,
    "sliding": sliding,
    "trimmed": trimmed,
    "middle": middle,
}


def named(spec: str) -> Client:
    """A client from `name:n` (`last_n_observations:5`)."""
    name, _, n = spec.partition(":")
    if name not in CLIENTS:
        raise ValueError(f"unknown client {name!r}: one of {', '.join(CLIENTS)}")
    return CLIENTS[name](int(n or 5))
