"""The per-request record of what the guard saw and did: counts, names and hashes, never text."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import Any, Literal

Outcome = Literal["unchanged", "fitted", "rejected"]


@dataclass(frozen=True)
class Action:
    """One strategy's work: how many items it touched and the input tokens it saved."""

    kind: str
    tokens_saved: int
    items: int = 0


@dataclass(frozen=True)
class Skipped:
    """A step the planner could not run, and why (e.g. summarize: no_summarizer)."""

    kind: str
    reason: str


@dataclass
class Report:
    """What the guard saw and did for one request: limits, counts before and after, the output
    reserved, the actions with the tokens each saved, and the outcome. Counts, names and hashes
    only: never message text."""

    model: str
    dialect: str
    window_rule: str
    context_window: int
    max_input_tokens: int
    max_output_tokens: int
    limits_source: str
    input_tokens_before: int
    input_tokens_after: int
    max_tokens: int
    max_tokens_requested: int | None
    max_tokens_source: str
    output_key: str
    safety_margin_tokens: int
    room: int
    target: int
    fits: bool
    outcome: Outcome
    exact_count: bool
    calibration_factor: float
    messages_before: int
    messages_after: int
    actions: list[Action] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    breakdown: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    fitted_messages_sha256: str | None = None
    calibration_key: str | None = None  # the deployment the factor was learned for (model|api_base)
    calibration_source: str = "static"  # static, learned, pinned or miss (see guard.core.calibration)
    # a fingerprint of where the history was cut (what was dropped, edited or summarized; compact
    # JSON is one flag): two turns of a growing conversation with the same `cut` send prompts
    # where the later starts with the earlier, byte for byte (the provider's cached prefix holds)
    cut: str | None = None
    # the number of leading messages the cut was decided on: the prefix whose cut this request
    # carries, as every turn does while it fits (None: decided on the whole request)
    cut_from: int | None = None
    summary: dict[str, Any] | None = None  # source (cache/llm), calls, span and summary sizes
    reasoning: list[dict[str, Any]] = field(default_factory=list)  # thinking fields lowered with the output
    # fields that make the provider add input the body does not carry (Responses API:
    # previous_response_id, conversation, a stored prompt): the counts above are then lower bounds
    unseen_state: list[str] = field(default_factory=list)
    # the conversation's provider cache as the guard judged it (cold, warm, unknown; None: not
    # judged), how long it had been idle, and the anchor its cut was carried from (see
    # guard.fit.temperature: counts only)
    cache_temperature: str | None = None
    idle_seconds: float | None = None
    anchor: dict[str, Any] | None = None
    # the cut this request carries as the conversation's record keeps it, for a history the client
    # edits before its next turn (guard.fit.edited: counts and a digest of the per-message counts)
    carried: dict[str, Any] | None = None
    # the note a question asked since the carried cut got: the lines of what the cut removed that
    # it asks about, put before it (guard.fit.notes): where, how many lines, its tokens
    note: dict[str, int] | None = None

    @property
    def tokens_saved(self) -> int:
        return self.input_tokens_before - self.input_tokens_after

    @property
    def changed(self) -> bool:
        return self.outcome == "fitted"

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (what `dataclasses.asdict` makes of it, its own copy of every
        nested value), with `tokens_saved`: built field by field, as it is twice a request."""
        data = {name: getattr(self, name) for name in _FIELDS}
        data["actions"] = [{"kind": a.kind, "tokens_saved": a.tokens_saved, "items": a.items} for a in self.actions]
        data["skipped"] = [{"kind": s.kind, "reason": s.reason} for s in self.skipped]
        data["breakdown"], data["unseen_state"] = dict(self.breakdown), list(self.unseen_state)
        data["anchor"] = None if self.anchor is None else dict(self.anchor)
        data["carried"] = None if self.carried is None else dict(self.carried)
        data["note"] = None if self.note is None else dict(self.note)
        data["summary"], data["reasoning"] = copy.deepcopy(self.summary), copy.deepcopy(self.reasoning)
        data["tokens_saved"] = self.tokens_saved
        return data


_FIELDS = tuple(f.name for f in fields(Report))
