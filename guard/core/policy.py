"""The guard's policy: validated with pydantic, layered defaults < model < team < key < request.

A `Policy` is the full set of knobs for one request. A `PolicySet` holds the defaults and the
per-model (first matching glob, in file order), per-team and per-key overrides, and resolves the
policy of one request. Lower layers may only tighten caps and margins (see `Policy.tightened`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from guard.core.calibration import Settings as CalibrationSettings
from guard.core.errors import PolicyError
from guard.core.steps import STRATEGY_ORDER, StrategyName

_CAPS = frozenset({"default_max_tokens", "max_output_tokens", "context_window", "max_input_tokens"})
_FLOORS = frozenset({"safety_margin_tokens", "safety_margin_ratio"})
CLIENT_FIELDS = _CAPS | _FLOORS | {"calibration", "strategies"}
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


METADATA_KEYS = "keys drop_metadata removes from JSON tool results (bulky retrieval metadata)"
CITATION_KEYS = "keys drop_metadata always keeps (what a citation needs)"
LAST_RESORT_CUTS = (
    "a cut made inside the newest turns (a result larger than the room, truncated to fit): carried while it "
    "fits, as any cut (carry), or cut anew once those turns are no longer the newest, under the truncated "
    "result (recut: cost over context)"
)
THINKING_WITHOUT_ROOM = (
    "when the output cap leaves no room for a valid thinking budget: refuse (400) or turn thinking off"
)
ON_UNGUARDED = (
    "a prompt for this model on a route the guard cannot fit (a pass-through, a call type it does not know): "
    "forward it, counted and logged (warn), or refuse it with a 400 (refuse)"
)
KEEP_RECENT_SHARE = (
    "the newest groups kept verbatim take at most this share of the room the pinned messages leave, and with "
    "the pinned ones stay under the bottom of the band below the low-water mark (the newest group always): where "
    "single turns or the pinned prompt are a large share of the room, fewer of them are kept whole, so a cut can "
    "go deep enough to last; unset = always keep_recent_groups"
)
KEEP_ANSWERED_SHARE = (
    "a last user message of at least this share of the room (a pasted log) keeps the assistant message it "
    "answers (words, no calls) verbatim while the agent works after it, where the request fits so: a new cut "
    "then drops the agent's steps and keeps the cached prefix through that message; where they would take over "
    "0.9 of the room with it, the first cut drops them, not the next; unset = off"
)
KEEP_FIRST_USER_TURN = (
    "keep the task verbatim: the first user message, and the request that ends the first user turn where "
    "the model's first reply follows more user messages"
)

SUMMARY_ROOM_RATIO = (
    "a carried cut's summary takes at most this share of the room the pinned messages leave (and at most a "
    "quarter band): in a small room a summary makes every cut that carries it last fewer turns"
)


class Policy(BaseModel):
    """Every setting the engine reads for one request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_max_tokens: int = Field(4096, ge=1, description="output reserved when the request sets none")
    max_output_tokens: int | None = Field(None, ge=1, description="cap on the output limit")
    min_output_tokens: int | None = Field(
        None, ge=1, description="floor for clamp_output; unset = never lower the client's max_tokens"
    )
    safety_margin_tokens: int = Field(512, ge=0, description="margin kept free (the larger of this and the ratio)")
    safety_margin_ratio: float = Field(0.01, ge=0.0, lt=0.5, description="fraction of the limit")
    low_water_ratio: float = Field(1.0, gt=0.0, le=1.0, description="a cut lands at most at this fraction of the room")
    cut_quantum_ratio: float = Field(
        0.35,
        gt=0.0,
        le=1.0,
        description=(
            "cuts move in quanta of this fraction of the room: larger = fewer prompt-cache breaks, less room used"
        ),
    )
    last_resort_cuts: Literal["carry", "recut"] = Field("carry", description=LAST_RESORT_CUTS)
    context_window: int | None = Field(None, ge=1, description="cap on the model's window")
    max_input_tokens: int | None = Field(None, ge=1, description="cap on the input limit (separate rule)")
    default_context_window: int | None = Field(
        None, ge=1, description="window for models with no known limits; unset = refuse them"
    )
    window_rule: Literal["shared", "separate"] | None = Field(None, description="unset = the model family's")
    calibration: dict[str, float] = Field(default_factory=dict, description="factor per model family")
    calibration_mode: Literal["static", "auto"] = Field(
        "static", description="auto: learn each deployment's factor from the input tokens its provider reports"
    )
    calibration_floor: float = Field(0.5, gt=0.0, description="lowest factor (and observed ratio) kept when learning")
    calibration_cap: float = Field(4.0, gt=0.0, description="highest factor (and observed ratio) kept when learning")
    calibration_quantile: float = Field(
        0.99, gt=0.0, le=1.0, description="the learned factor: this quantile of recent ratios"
    )
    calibration_min_observations: int = Field(
        20, ge=1, description="answers needed before a learned factor replaces the static one"
    )
    calibration_miss_step: float = Field(
        1.1, ge=1.0, description="a counting miss raises the factor to this times the one that missed"
    )
    calibration_tail: float = Field(
        0.5,
        ge=0.0,
        le=10.0,
        description="a learned factor adds this times the gap between its quantile and the 90th percentile",
    )
    calibration_headroom: float = Field(0.03, ge=0.0, le=1.0, description="and is then multiplied by 1 + this")
    strategies: list[StrategyName] = Field(default_factory=lambda: list(STRATEGY_ORDER), description="steps, in order")
    keep_recent_groups: int = Field(3, ge=0, description="newest turn groups kept verbatim")
    keep_recent_share: float | None = Field(0.5, gt=0.0, le=1.0, description=KEEP_RECENT_SHARE)
    keep_first_user_turn: bool = Field(True, description=KEEP_FIRST_USER_TURN)
    keep_answered_share: float | None = Field(0.25, gt=0.0, le=1.0, description=KEEP_ANSWERED_SHARE)
    truncated_tool_result_tokens: int = Field(200, ge=16, description="what a truncated result keeps")
    summary_max_tokens: int = Field(1024, ge=64, description="output budget of one summary")
    summary_low_water_ratio: float = Field(
        0.7,
        gt=0.0,
        lt=1.0,
        description="a request fitted whole (its cut not carried) is summarized down to this fraction of the room",
    )
    summary_room_ratio: float = Field(0.0625, gt=0.0, le=1.0, description=SUMMARY_ROOM_RATIO)
    cache_ttl_seconds: int | None = Field(
        None,
        ge=0,
        description="how long the provider keeps a conversation's cached prompt; unset = the provider's "
        "(5 min, 1 h where Anthropic cache_control asks for it); 0 = never treat a cache as cold",
    )
    relevance: Literal["bm25", "off"] = Field(
        "bm25", description="cut what the last user message is about last (bm25), or strictly oldest first"
    )
    metadata_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_METADATA_KEYS), description=METADATA_KEYS)
    citation_keys: list[str] = Field(default_factory=lambda: list(DEFAULT_CITATION_KEYS), description=CITATION_KEYS)
    context_fallbacks: Literal["before_cutting", "after_cutting"] = Field(
        "before_cutting",
        description="with context_window_fallbacks: try the fallback models before any lossy step "
        "(before_cutting), or cut on the requested model first (after_cutting: cost over completeness)",
    )
    thinking_without_room: Literal["refuse", "disable"] = Field("refuse", description=THINKING_WITHOUT_ROOM)
    on_unguarded: Literal["warn", "refuse"] = Field("warn", description=ON_UNGUARDED)
    on_error: Literal["open", "closed"] = Field("open", description="if the guard fails: forward (open) or refuse")

    @model_validator(mode="after")
    def _check(self) -> Policy:
        for family, factor in self.calibration.items():
            if factor < 1.0:
                raise ValueError(f"calibration[{family!r}] = {factor} would under-count; use >= 1.0")
        if self.calibration_floor > self.calibration_cap:
            raise ValueError("calibration_floor is above calibration_cap")
        if self.min_output_tokens and self.max_output_tokens and self.min_output_tokens > self.max_output_tokens:
            raise ValueError("min_output_tokens is above max_output_tokens")
        return self

    def calibration_settings(self) -> CalibrationSettings:
        return CalibrationSettings(
            mode=self.calibration_mode,
            floor=self.calibration_floor,
            cap=self.calibration_cap,
            quantile=self.calibration_quantile,
            min_observations=self.calibration_min_observations,
            miss_step=self.calibration_miss_step,
            tail=self.calibration_tail,
            headroom=self.calibration_headroom,
        )

    def allows(self, strategy: StrategyName) -> bool:
        return strategy in self.strategies

    def replaced(self, override: Mapping[str, Any]) -> Policy:
        """This policy with fields replaced (the model layer: the admin refines the defaults)."""
        try:
            return Policy.model_validate({**self.model_dump(), **override})
        except ValidationError as e:
            raise PolicyError(f"invalid policy override:\n{e}") from None

    def tightened(self, override: Mapping[str, Any], *, trusted: bool) -> Policy:
        """This policy with `override` applied so that limits only get stricter.

        Caps (window, input, output, default output) take the minimum, margins and calibration
        factors the maximum, strategies the intersection. Other fields are replaced when the
        override is trusted (admin-set team/key policy) and ignored when it is not (a client's
        request); `ignored_fields` lists what an untrusted override could not change.
        """
        data = self.model_dump()
        for name, value in override.items():
            if name not in Policy.model_fields:
                raise PolicyError(f"unknown policy field {name!r}")
            if value is None:
                continue
            current = data[name]
            if name in _CAPS:
                data[name] = value if current is None else min(current, value)
            elif name in _FLOORS:
                data[name] = max(current, value)
            elif name == "calibration":
                merged = dict(current)
                for family, factor in dict(value).items():
                    merged[family] = max(merged.get(family, 1.0), factor)
                data[name] = merged
            elif name == "strategies":
                data[name] = [s for s in current if s in set(value)]
            elif trusted:
                data[name] = value
        try:
            return Policy.model_validate(data)
        except ValidationError as e:
            raise PolicyError(f"invalid policy override:\n{e}") from None


class PolicySet(BaseModel):
    """Defaults, then per-model overrides keyed by glob (`claude-*`, `openai/*`), then per team
    (team id or alias) and per key (key alias), each of which may only tighten what it inherits.

    Precedence: defaults < model < team < key < request (client hints, caps only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: Policy = Field(default_factory=Policy)
    models: dict[str, dict[str, Any]] = Field(default_factory=dict)
    teams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    keys: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _validate_overrides(self) -> PolicySet:
        for section in ("models", "teams", "keys"):
            for name, override in getattr(self, section).items():
                if not isinstance(override, Mapping):
                    raise ValueError(f"{section}[{name!r}] must be a mapping")
                try:
                    self.defaults.replaced(override)  # every value valid on its own
                    if section != "models":
                        self.defaults.tightened(override, trusted=True)
                except PolicyError as e:
                    raise ValueError(f"{section}[{name!r}]: {e}") from None
        return self

    def for_model(self, *names: str) -> Policy:
        """Defaults updated by the first glob matching any of the names (alias, then real model)."""
        for pattern, override in self.models.items():
            if any(fnmatch.fnmatchcase(n, pattern) for n in names if n):
                return self.defaults.replaced(override)
        return self.defaults

    def resolve(
        self,
        models: tuple[str, ...],
        *,
        team: tuple[str | None, ...] = (),
        key: tuple[str | None, ...] = (),
        trusted: tuple[Mapping[str, Any], ...] = (),
        client: Mapping[str, Any] | None = None,
    ) -> tuple[Policy, list[str]]:
        """The policy for one request and the layers that applied.

        `team`/`key` are identifiers looked up in this set's `teams`/`keys` (first hit wins);
        `trusted` are admin-set overrides (e.g. team/key metadata); `client` are the request's
        hints, which may only tighten caps and margins or narrow the strategies."""
        policy = self.for_model(*models)
        applied = ["model"] if policy is not self.defaults else []
        for layer, table, names in (("team", self.teams, team), ("key", self.keys, key)):
            for name in names:
                if name and name in table:
                    policy = policy.tightened(table[name], trusted=True)
                    applied.append(f"{layer}:{name}")
                    break
        for override in trusted:
            policy = policy.tightened(override, trusted=True)
            applied.append("metadata")
        if client:
            allowed = {k: v for k, v in client.items() if k in CLIENT_FIELDS}
            policy = policy.tightened(allowed, trusted=False)
            applied.append("client")
        return policy, applied


def load_policy_set(section: Mapping[str, Any] | None) -> PolicySet:
    """Validate a `context_guard:` config section; flat keys are the defaults."""
    data = dict(section or {})
    layers = {name: data.pop(name, None) or {} for name in ("models", "teams", "keys")}
    defaults = data.pop("defaults", None)
    if defaults is not None and data:
        raise PolicyError(f"context_guard: put {sorted(data)} under 'defaults' (or drop 'defaults')")
    try:
        return PolicySet(defaults=Policy.model_validate(defaults if defaults is not None else data), **layers)
    except ValidationError as e:
        raise PolicyError(f"invalid context_guard policy:\n{e}") from None
