"""Reasoning budgets that stay valid when the guard sets or lowers the output limit.

A reasoning model spends part of its output limit thinking, and providers check the two together:
- Anthropic extended thinking (`thinking: {type: enabled, budget_tokens: B}`, on `/v1/messages`
  and, through LiteLLM, on chat completions): `1024 <= B < max_tokens`, or the request is refused.
- LiteLLM maps chat `reasoning_effort` to such a budget for Claude (`minimal`/`low` 1024,
  `medium` 2048, `high` 4096, `xhigh` 8192, `max` 16384: `litellm/constants.py`
  DEFAULT_REASONING_EFFORT_*_THINKING_BUDGET; models with adaptive thinking get no budget) and to
  `thinkingConfig.thinkingBudget` for Gemini, which counts inside `maxOutputTokens`.

So whenever the guard lowers `max_tokens` (a model or policy cap, or the clamp step), it lowers the
thinking budget with it: the client's answer room (`max_tokens - budget`) is kept where possible,
never below the provider's minimum budget; a `reasoning_effort` steps down to the highest level
whose budget still fits. When the cap leaves no room for any valid budget, the request is refused
with a clear 400 naming the cap, or thinking is turned off where the policy says
(`thinking_without_room: disable`). Pure: no LiteLLM import; tests check the result against
LiteLLM's own transformations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard.core.errors import BadRequest

ANTHROPIC_MIN_BUDGET = 1024  # Anthropic refuses budget_tokens below this
GEMINI_MIN_BUDGET = 128  # Gemini 2.5 Pro's least thinkingBudget (Flash accepts less)
# LiteLLM 1.106's reasoning_effort -> thinking budget for Claude (and Gemini's thinkingBudget),
# strongest first; "minimal" is max(128, 1024) for Claude and 1-512 for Gemini models
EFFORT_BUDGETS: dict[str, int] = {
    "max": 16384,
    "xhigh": 8192,
    "high": 4096,
    "medium": 2048,
    "low": 1024,
    "minimal": 1024,
}
_EFFORT_ORDER = tuple(EFFORT_BUDGETS)
_THINKING_FAMILIES = ("anthropic", "gemini")  # where LiteLLM turns reasoning into a budget


@dataclass(frozen=True)
class ReasoningChange:
    """One reasoning field the guard changed to keep the request valid under its output limit."""

    field: str  # "thinking.budget_tokens", "thinking", "reasoning_effort"
    before: Any
    after: Any  # None: removed (thinking turned off by policy)

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after}


class ThinkingWithoutRoom(BadRequest):
    """The output limit leaves no room for a valid thinking budget (a client error: HTTP 400)."""

    def __init__(self, model: str, max_tokens: int, minimum: int, what: str) -> None:
        self.model, self.max_tokens, self.minimum = model, max_tokens, minimum
        super().__init__(
            f"context-guard: max_tokens for model {model!r} is capped at {max_tokens}, which leaves no room for "
            f"{what}: the thinking budget must be at least {minimum} and below max_tokens. "
            "Turn thinking off, or ask for a model or policy with a higher output cap."
        )


def minimum_budget(family: str) -> int:
    return {"anthropic": ANTHROPIC_MIN_BUDGET, "gemini": GEMINI_MIN_BUDGET}.get(family, 1)


def _effort_budget(effort: str, family: str) -> int:
    if effort == "minimal" and family == "gemini":
        return GEMINI_MIN_BUDGET
    return EFFORT_BUDGETS[effort]


def _budget_of(body: Mapping[str, Any]) -> int | None:
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        return None
    return budget


def _effort(body: Mapping[str, Any], family: str, adaptive: bool) -> str | None:
    """The body's reasoning_effort where LiteLLM turns it into a thinking budget."""
    effort = body.get("reasoning_effort")
    if isinstance(effort, Mapping):  # {"effort": "low", "summary": ...}: LiteLLM reads the effort
        effort = effort.get("effort")
    if adaptive or family not in _THINKING_FAMILIES or not isinstance(effort, str) or effort not in EFFORT_BUDGETS:
        return None
    return effort


def output_floor(body: Mapping[str, Any], family: str, adaptive: bool = False) -> int:
    """The least output limit that keeps the body's reasoning valid (0: no reasoning budget):
    the clamp step never goes below it."""
    if _budget_of(body) is not None:
        return minimum_budget(family) + 1
    if _effort(body, family, adaptive) is not None:
        return _effort_budget("minimal", family) + 1
    return 0


@dataclass(frozen=True)
class Terms:
    """What a body's reasoning is fitted by, besides its output limit: the model and its family, the
    output the client asked for, what to do when no valid budget fits (`refuse` or `disable`), and
    whether LiteLLM maps reasoning effort to adaptive thinking (no budget) for the model."""

    family: str
    model: str
    requested: int | None
    without_room: str = "refuse"
    adaptive: bool = False


def fit_reasoning(
    body: Mapping[str, Any], terms: Terms, max_tokens: int
) -> tuple[dict[str, Any], list[ReasoningChange]]:
    """The top-level fields to set (a value of None: remove the key) so the body's reasoning fits
    under `max_tokens`, and what changed. Raises ThinkingWithoutRoom when nothing valid fits and
    the policy says refuse."""
    family, model, requested = terms.family, terms.model, terms.requested
    without_room, adaptive = terms.without_room, terms.adaptive
    updates: dict[str, Any] = {}
    changes: list[ReasoningChange] = []
    budget = _budget_of(body)
    if budget is not None and budget >= max_tokens:
        minimum = minimum_budget(family)
        # keep the answer room the client chose (max_tokens - budget), but not at the cost of the budget
        answer = max(1, requested - budget) if requested is not None and requested > budget else 1
        new = min(budget, max(minimum, max_tokens - answer), max_tokens - 1)
        if new >= minimum:
            updates["thinking"] = {**body["thinking"], "budget_tokens": new}
            changes.append(ReasoningChange("thinking.budget_tokens", budget, new))
        elif without_room == "disable":
            updates["thinking"] = None
            changes.append(ReasoningChange("thinking", "enabled", None))
        else:
            raise ThinkingWithoutRoom(model, max_tokens, minimum, f"a thinking budget ({budget} requested)")
    effort = _effort(body, family, adaptive)
    if effort is not None and _effort_budget(effort, family) >= max_tokens:
        lower = [e for e in _EFFORT_ORDER[_EFFORT_ORDER.index(effort) :] if _effort_budget(e, family) < max_tokens]
        if lower:
            raw = body["reasoning_effort"]
            updates["reasoning_effort"] = {**raw, "effort": lower[0]} if isinstance(raw, Mapping) else lower[0]
            changes.append(ReasoningChange("reasoning_effort", effort, lower[0]))
        elif without_room == "disable":
            updates["reasoning_effort"] = None
            changes.append(ReasoningChange("reasoning_effort", effort, None))
        else:
            raise ThinkingWithoutRoom(
                model, max_tokens, _effort_budget("minimal", family), f"reasoning_effort={effort!r} (a thinking budget)"
            )
    return updates, changes


def apply(body: dict[str, Any], updates: Mapping[str, Any]) -> None:
    """Write `fit_reasoning`'s updates into a body the caller owns (None removes the key)."""
    for key, value in updates.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
