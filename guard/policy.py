"""The guard's policy: validated with pydantic, layered defaults < per-model overrides (glob).

A `Policy` is the full set of knobs for one request. A `PolicySet` holds the defaults and the
per-model overrides (first matching glob, in file order) and resolves the policy for a model.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from guard.errors import PolicyError

StrategyName = Literal[
    "clamp_output",
    "compact_json",
    "drop_metadata",
    "dedupe",
    "truncate_tool_results",
    "summarize",
    "drop_oldest_turns",
    "truncate_recent_tool_results",
]
STRATEGY_ORDER: tuple[StrategyName, ...] = (
    "clamp_output",
    "compact_json",
    "drop_metadata",
    "dedupe",
    "truncate_tool_results",
    "summarize",
    "drop_oldest_turns",
    "truncate_recent_tool_results",
)
DEFAULT_METADATA_KEYS = [
    "metadata",
    "meta",
    "_meta",
    "embedding",
    "embeddings",
    "vector",
    "vectors",
    "raw",
    "raw_html",
    "html",
    "debug",
    "trace",
    "highlights",
    "scores_detail",
]
DEFAULT_CITATION_KEYS = ["id", "doc_id", "title", "url", "uri", "link", "source", "path", "page", "section", "doi"]


class Policy(BaseModel):
    """Every setting the engine reads for one request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_max_tokens: int = Field(4096, ge=1, description="output reserved when the request sets none")
    max_output_tokens: int | None = Field(None, ge=1, description="cap on the output limit")
    min_output_tokens: int | None = Field(
        None, ge=1, description="floor for clamp_output; unset = never lower the client's max_tokens"
    )
    safety_margin_tokens: int = Field(512, ge=0)
    safety_margin_ratio: float = Field(0.01, ge=0.0, lt=0.5, description="fraction of the limit")
    low_water_ratio: float = Field(
        0.9, gt=0.0, le=1.0, description="cut to this fraction of the room so the next turns fit too"
    )
    context_window: int | None = Field(None, ge=1, description="cap on the model's window")
    max_input_tokens: int | None = Field(None, ge=1, description="cap on the input limit (separate rule)")
    default_context_window: int | None = Field(
        None, ge=1, description="window for models with no known limits; unset = refuse them"
    )
    window_rule: Literal["shared", "separate"] | None = None
    calibration: dict[str, float] = Field(default_factory=dict, description="factor per model family")
    strategies: list[StrategyName] = Field(default_factory=lambda: list(STRATEGY_ORDER))
    keep_recent_groups: int = Field(3, ge=0, description="newest turn groups kept verbatim")
    keep_first_user_turn: bool = Field(True, description="keep the first user message (the task) verbatim")
    truncated_tool_result_tokens: int = Field(200, ge=16, description="what a truncated result keeps")
    summary_max_tokens: int = Field(1024, ge=64, description="output budget of one summary")
    metadata_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_METADATA_KEYS))
    citation_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_CITATION_KEYS))
    on_error: Literal["open", "closed"] = Field(
        "open", description="if the guard itself fails: forward unchanged (open) or refuse (closed)"
    )

    @model_validator(mode="after")
    def _check(self) -> Policy:
        for family, factor in self.calibration.items():
            if factor < 1.0:
                raise ValueError(f"calibration[{family!r}] = {factor} would under-count; use >= 1.0")
        if self.min_output_tokens and self.max_output_tokens and self.min_output_tokens > self.max_output_tokens:
            raise ValueError("min_output_tokens is above max_output_tokens")
        return self

    def allows(self, strategy: StrategyName) -> bool:
        return strategy in self.strategies


class PolicySet(BaseModel):
    """Defaults plus per-model overrides keyed by glob (`claude-*`, `openai/*`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: Policy = Field(default_factory=Policy)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _validate_overrides(self) -> PolicySet:
        for pattern, override in self.models.items():
            try:
                self.defaults.model_validate({**self.defaults.model_dump(), **override})
            except ValidationError as e:
                raise ValueError(f"models[{pattern!r}]: {e}") from None
        return self

    def for_model(self, *names: str) -> Policy:
        """Defaults updated by the first glob matching any of the names (alias, then real model)."""
        for pattern, override in self.models.items():
            if any(fnmatch.fnmatchcase(n, pattern) for n in names if n):
                return Policy.model_validate({**self.defaults.model_dump(), **override})
        return self.defaults


def load_policy_set(section: Mapping[str, Any] | None) -> PolicySet:
    """Validate a `context_guard:` config section; flat keys are the defaults."""
    data = dict(section or {})
    models = data.pop("models", {}) or {}
    defaults = data.pop("defaults", None)
    if defaults is not None and data:
        raise PolicyError(f"context_guard: put {sorted(data)} under 'defaults' (or drop 'defaults')")
    try:
        return PolicySet(defaults=Policy.model_validate(defaults if defaults is not None else data), models=models)
    except ValidationError as e:
        raise PolicyError(f"invalid context_guard policy:\n{e}") from None
