"""Cache temperature: whether a conversation's prompt cache at the provider is still warm.

Providers drop a cached prefix after a time to live (Anthropic: 5 minutes, or 1 hour when the
request marks `cache_control` with `ttl: "1h"`; OpenAI keeps in-memory prefixes for minutes). A
cut on a warm conversation costs the cached prefix it breaks, so cuts are carried while they fit
(see `guard.fit.replay.last_cut`). On a cold conversation nothing is cached: a cut costs nothing
extra, so the guard cuts then, below the band (halfway from `Budget.floor` to the room bar, 60% of
the room), and the cut lasts more than a band of growth (an *anchor*); later turns carry the anchor
while it fits the room, and when it no longer does the guard anchors anew, at the bottom of the
band. A conversation never seen cold keeps the stateless replay, unchanged.

A conversation is recognised by a fingerprint of its model, its pinned prompt (system) and its task
(the first user message): every turn of an agent loop resends both. What is remembered per
fingerprint is when it was last sent, its anchor (counts only: the prefix's message count, the
mark it was cut to, and its token count, which tells a changed prefix apart) and the cut its last
turn carried (for histories the client edits: `guard.fit.edited`). The log here is
bounded and in process memory; the proxy mirrors it in its coordination Redis
(`guard.state.seen_store`), and when that Redis is configured but fails the shell reports the
temperature as unknown: the guard then behaves as if every cache were warm (no anchors).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from guard.core.content import blocks, compact_json
from guard.dialects import Dialect
from guard.fit.edited import LastCut, is_count, is_factor

State = Literal["cold", "warm", "unknown"]
# how long a provider keeps an unused cached prefix, per model family (seconds)
DEFAULT_TTL_SECONDS = {"anthropic": 300, "openai": 300}
FALLBACK_TTL_SECONDS = 300
LONG_TTL_SECONDS = 3600  # Anthropic's `cache_control: {"ttl": "1h"}`
LOG_ENTRIES = 10_000
ROLLOUTS = 4  # rollouts of one task whose cuts a conversation's record keeps (`Seen.others`)
ROLLOUT_CUTS = 3  # the cuts a rollout carried that the record keeps: its last and those before (`Seen.earlier`)


@dataclass(frozen=True)
class Anchor:
    """A cut decided on the conversation's first `length` messages (then `prefix_tokens` tokens),
    down to `mark` input tokens, for a request whose room was `room`, counted with the calibration
    factor `factor` (0: not recorded); carried by later turns while it fits, made again as it was
    for that room and factor."""

    length: int
    mark: int
    prefix_tokens: int
    room: int = 0
    factor: float = 0.0

    def of_this(self, counts: Sequence[int]) -> bool:
        """Whether this anchor is of the history whose messages count `counts`: its prefix is there,
        as many tokens as when it was cut (not another conversation with the same task, nor edited)."""
        return self.length <= len(counts) and sum(counts[: self.length]) == self.prefix_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "mark": self.mark,
            "prefix_tokens": self.prefix_tokens,
            "room": self.room,
            "factor": self.factor,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Anchor | None:
        if not isinstance(data, Mapping):
            return None
        values = [data.get(k) for k in ("length", "mark", "prefix_tokens")] + [data.get("room", 0)]
        ints = [v for v in values if is_count(v)]
        factor = data.get("factor", 0.0)
        if len(ints) != 4 or not is_factor(factor):
            return None
        length, mark, prefix_tokens, room = ints
        return cls(length, mark, prefix_tokens, room, float(factor))


@dataclass(frozen=True)
class Seen:
    """When a conversation was last sent (seconds since the epoch), the anchor it was sent with and
    the cut its last turn carried (`guard.fit.edited`); `others`: the cuts the last turns of other
    rollouts of its task carried (an eval harness's samples, RL rollouts, an agent's retries share a
    fingerprint), the most recent first, at most `ROLLOUTS` - 1 (`kept`); `earlier`: the cuts the
    rollout of `last` carried before it, the most recent first, with it at most `ROLLOUT_CUTS`, for a
    client that goes back to a turn that carried one (`LastCut.went_back`: a rewind, a retried step)."""

    at: float
    anchor: Anchor | None = None
    last: LastCut | None = None
    others: tuple[LastCut, ...] = ()
    earlier: tuple[LastCut, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "at": self.at,
                "anchor": self.anchor.to_dict() if self.anchor else None,
                "last": self.last.to_dict() if self.last else None,
                "others": [o.to_dict() for o in self.others],
                "earlier": [e.to_dict() for e in self.earlier],
            }
        )

    @classmethod
    def kept(cls, at: float, anchor: Anchor | None, last: LastCut | None, before: Temperature, rollout: str) -> Seen:
        """The record of a turn of rollout `rollout` (`guard.fit.edited.rollout`) sent at `at` that
        carried `last` (None: no cut), with the cuts of the other rollouts the conversation's
        record held `before` it (its own older one is dropped) and the cuts this rollout carried
        before `last` (its older one among them where `last` is another cut)."""
        known = (before.last, *before.others)
        others = tuple(c for c in known if c is not None and not c.of_rollout(rollout))
        earlier = tuple(c for c in before.earlier if c.of_rollout(rollout))
        mine = before.last if before.last is not None and before.last.of_rollout(rollout) else None
        if mine is not None and (last is None or not last.same_cut(mine)):
            earlier = (mine, *earlier)
        elif mine is not None and last is not None and 0 < mine.since < (last.since or math.inf):
            last = replace(last, since=mine.since)  # (a cut made again as it was: sent since its first turn)
        if last is not None:  # (a turn that went back carries one of them: it is the last now)
            earlier = tuple(c for c in earlier if not c.same_cut(last))
        return cls(at, anchor, last, others[: ROLLOUTS - 1], earlier[: ROLLOUT_CUTS - (last is not None)])

    @classmethod
    def from_json(cls, text: str | bytes | None) -> Seen | None:
        try:
            data = json.loads(text) if text else None
        except (TypeError, ValueError):
            return None
        if (
            not isinstance(data, Mapping)
            or not isinstance(data.get("at"), (int, float))
            or isinstance(data.get("at"), bool)
        ):
            return None
        others, earlier = _cuts(data.get("others"), ROLLOUTS - 1), _cuts(data.get("earlier"), ROLLOUT_CUTS)
        last, anchor = LastCut.from_dict(data.get("last")), Anchor.from_dict(data.get("anchor"))
        return cls(float(data["at"]), anchor, last, others, earlier)


def _cuts(data: Any, most: int) -> tuple[LastCut, ...]:
    """The first `most` cuts of a record's list of them, read back (those that do not read left out)."""
    kept = [LastCut.from_dict(c) for c in data[:most]] if isinstance(data, list) else []
    return tuple(c for c in kept if c is not None)


@dataclass(frozen=True)
class Temperature:
    """What the planner is told about a conversation's provider cache."""

    state: State
    idle_seconds: float | None = None  # since the conversation was last sent (None: never seen)
    anchor: Anchor | None = None
    last: LastCut | None = None  # the cut the conversation's last turn carried
    others: tuple[LastCut, ...] = ()  # those other rollouts of its task carried (`Seen.others`)
    earlier: tuple[LastCut, ...] = ()  # those its rollout carried before the last (`Seen.earlier`)

    def cut_for(self, messages: int) -> LastCut | None:
        """The cut of its rollout a turn of `messages` messages carries first: for one shorter than
        the last turn, an earlier one that a turn as long carried (`LastCut.carried_by`: the client
        went back to it); else the last (after a rewind, the branch goes on from its own cut, which
        the provider's cache holds, not from the one the turns it went back from carried)."""
        last = self.last
        if last is not None and messages >= last.history:
            return last
        return next((c for c in self.earlier if c.carried_by(messages)), last)

    def records(self, messages: int) -> tuple[LastCut, ...]:
        """The cuts of the record a turn of `messages` messages may carry, in the order it tries them
        (`guard.fit.carried`): its rollout's (`cut_for`; where that is an earlier one, the last
        right after it), other rollouts', then earlier ones of its rollout that a turn this long
        carried (a client that went back goes on as it went)."""
        first = self.cut_for(messages)
        back = [c for c in self.earlier if c.carried_by(messages) and c is not first]
        # (a turn shorter than the last one may be of a client that slid its window past more
        # messages than it added, `guard.fit.slid`, not of one that went back)
        last = self.last if self.last is not first else None
        return tuple(c for c in (first, last, *self.others, *back) if c is not None)


UNKNOWN = Temperature("unknown")


def fingerprint(dialect: Dialect, body: Mapping[str, Any], model: str) -> str:
    """The conversation a request belongs to: its model, pinned prompt and task, hashed."""
    messages = dialect.messages(body)
    first = next((i for i, m in enumerate(messages) if dialect.is_user_turn(m)), len(messages) - 1)
    pinned = {k: body.get(k) for k in ("system", "instructions") if body.get(k) is not None}
    text = compact_json([model, dialect.name, pinned, messages[: first + 1]], sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]  # (lone surrogates too)


def _long(value: Any) -> bool:
    control = value.get("cache_control") if isinstance(value, Mapping) else None
    return isinstance(control, Mapping) and control.get("ttl") == "1h"


def _asks_long_ttl(body: Mapping[str, Any]) -> bool:
    """Whether a breakpoint of the body asks for the hour: on the body, a tool, a system block, a
    message, one of its blocks or a block inside a tool result's content (where Anthropic reads
    `cache_control`; not inside tool inputs or schemas, which are data)."""
    places = [body, *_listed(body.get("tools")), *_listed(body.get("system"))]
    for msg in _listed(body.get("messages")):
        places.append(msg)
        for block in _blocks(msg):
            places += [block, *_blocks(block)]
    return any(_long(v) for v in places)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _blocks(value: Any) -> list[Any]:
    """A message's (or a tool result's) content blocks (`content.blocks`), none for what is not one."""
    return blocks(value) if isinstance(value, Mapping) else []


def ttl_seconds(configured: int | None, family: str, body: Mapping[str, Any]) -> int:
    """How long the provider keeps this conversation's cached prefix: the policy's
    `cache_ttl_seconds`, else an hour where the body asks Anthropic for `ttl: "1h"`, else the
    family's default (5 minutes)."""
    if configured is not None:
        return configured
    if family == "anthropic" and _asks_long_ttl(body):
        return LONG_TTL_SECONDS
    return DEFAULT_TTL_SECONDS.get(family, FALLBACK_TTL_SECONDS)


def judge(seen: Seen | None, now: float, ttl: int) -> Temperature:
    """Cold when the conversation was sent before and not for longer than `ttl` (a conversation
    never seen is warm: it may be one turn of a loop this process has not served yet, and cutting
    it deep would waste room for nothing). `ttl` 0: never cold."""
    if seen is None:
        return Temperature("warm")
    idle = max(0.0, now - seen.at)
    cold = ttl > 0 and idle > ttl
    return Temperature("cold" if cold else "warm", idle, seen.anchor, seen.last, seen.others, seen.earlier)


class SeenLog:
    """The last time each conversation was sent, and its anchor: bounded (least recently sent
    forgotten first), thread-safe, in process memory."""

    def __init__(self, entries: int = LOG_ENTRIES) -> None:
        self.entries = entries
        self._seen: OrderedDict[str, Seen] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Seen | None:
        with self._lock:
            return self._seen.get(key)

    def put(self, key: str, seen: Seen) -> None:
        """Keep `seen` unless a later sending is already known (another worker's, through Redis)."""
        with self._lock:
            known = self._seen.get(key)
            if known is not None and known.at > seen.at:
                return
            self._seen[key] = seen
            self._seen.move_to_end(key)
            while len(self._seen) > self.entries:
                self._seen.popitem(last=False)

    def __len__(self) -> int:
        return len(self._seen)
