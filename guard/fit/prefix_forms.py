"""What a carried cut's prefix fits are keyed by and the messages as they go once a request is
over its room (`guard.fit.carried`): worked out once per request, memoised across requests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from guard.core import memo
from guard.core.budget import Budget
from guard.core.policy import Policy
from guard.core.tokens import TokenCounter, message_hash
from guard.fit.request import Counted
from guard.fit.strategies.compact import compacted


class PrefixKeys:
    """What the cut of a prefix of this request's history down to a mark depends on: the prefix's
    content, the request's fixed tokens and budget, the policy and whether it summarizes. Each
    message's hash and the policy's JSON are worked out once per request, on first use."""

    def __init__(self, req: Counted, budget: Budget, policy: Policy, summarizing: bool) -> None:
        self.dialect, self.messages = req.dialect, req.messages
        self.rest = (req.fixed, budget.room, budget.band, summarizing)
        self.policy = policy
        self._hashes: Sequence[int] | None = req.hashes if len(req.hashes) == len(req.messages) else None
        self._policy: str | None = None

    def __call__(self, m: int, mark: int) -> tuple[Any, ...]:
        if self._policy is None:
            self._policy = self.policy.model_dump_json()
        return (hash(tuple(self.hashes()[:m])), m, mark, *self.rest, self._policy)

    def hashes(self) -> Sequence[int]:
        """Each message's `message_hash` (the counter's, where the request was counted with it)."""
        if self._hashes is None:
            self._hashes = [message_hash(self.dialect.name, msg) for msg in self.messages]
        return self._hashes


class SentForms:
    """A request's messages as they go once it is over its room: JSON compacted where the policy
    compacts (`form`, made on first use) and counted exactly (`sent`: the fewer of the two counts).
    Each message's compacted count is memoised by its hash (a turn compacts and counts its new
    messages only)."""

    def __init__(
        self, req: Counted, counter: TokenCounter, compacting: bool, hashes: Callable[[], Sequence[int]]
    ) -> None:
        self.dialect, self.messages, self.counts = req.dialect, req.messages, req.counts
        self.counter, self.compacting, self.hashes = counter, compacting, hashes
        self._forms: dict[int, Mapping[str, Any]] = {}

    def sent(self) -> list[int]:
        if not self.compacting:
            return list(self.counts)
        dialect, counter, messages = self.dialect, self.counter, self.messages
        memos, hashes = memo.current().compacted_counts, self.hashes()
        sent = list(self.counts)
        todo = []
        for i, h in enumerate(hashes):
            n = memos.get((h, counter))
            if n is None:
                todo.append(i)
            else:
                sent[i] = min(sent[i], n)
        changed = [i for i in todo if self.form(i) is not messages[i]]
        for i, n in zip(changed, counter.messages(dialect, [self.form(i) for i in changed])):
            sent[i] = min(sent[i], n)
        for i in todo:
            memos.put((hashes[i], counter), sent[i])
        return sent

    def form(self, i: int) -> Mapping[str, Any]:
        """Message i as it goes over the room."""
        if i not in self._forms:
            msg = self.messages[i]
            self._forms[i] = compacted(self.dialect, msg) if self.compacting else msg
        return self._forms[i]
