"""Model limits: LiteLLM's model map, then the proxy config's model_info, then the policy.

LiteLLM's map gives `max_input_tokens` (for shared-window models this is the whole window) and
`max_output_tokens`; its `max_tokens` field is the *output* cap, a legacy name, and is only used
when `max_output_tokens` is missing. A `model_info` block of a `model_list` entry overrides the
map; the policy may lower (never raise) the window (`context_window`, `max_input_tokens`: both cap
the input limit, which is the whole window under the shared rule) and the output cap, and may set
the window of an otherwise unknown model (`default_context_window`).

Window rules:
- shared: input + reserved output + margin <= window (OpenAI chat models, Anthropic, local servers)
- separate: input + margin <= max_input_tokens and output <= max_output_tokens (Gemini, GPT-5)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from guard.core.errors import PolicyError, UnknownModel
from guard.core.models import WindowRule, profile
from guard.core.policy import Policy


@dataclass(frozen=True)
class ModelLimits:
    """A model's limits as the guard uses them, and where they came from."""

    model: str
    max_input_tokens: int  # the whole window under the shared rule
    max_output_tokens: int
    rule: WindowRule
    source: str

    @property
    def context_window(self) -> int:
        if self.rule == "shared":
            return self.max_input_tokens
        return self.max_input_tokens + self.max_output_tokens


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, float) and value > 0 and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and int(value) > 0:
        return int(value)
    return None


Resolver = Callable[[str], "Mapping[str, Any] | None"]  # a model name -> limits, e.g. LiteLLM's get_model_info


def lookup(model_map: Mapping[str, Any], model: str) -> Mapping[str, Any] | None:
    """The map entry of a model name: exact, then without provider prefixes, then lowercased."""
    candidates = [model]
    parts = model.split("/")
    candidates += ["/".join(parts[i:]) for i in range(1, len(parts))]
    candidates += [c.lower() for c in candidates]
    for name in candidates:
        entry = model_map.get(name)
        if isinstance(entry, Mapping) and _positive_int(entry.get("max_input_tokens") or entry.get("max_tokens")):
            return entry
    return None


def _resolve(resolver: Resolver | None, name: str) -> Mapping[str, Any] | None:
    if resolver is None:
        return None
    try:
        info = resolver(name)
    except Exception:  # an unknown name: the raw map or the policy decide
        return None
    if isinstance(info, Mapping) and _positive_int(info.get("max_input_tokens") or info.get("max_tokens")):
        return info
    return None


def _io(entry: Mapping[str, Any]) -> tuple[int | None, int | None]:
    max_in = _positive_int(entry.get("max_input_tokens"))
    max_out = _positive_int(entry.get("max_output_tokens"))
    legacy = _positive_int(entry.get("max_tokens"))
    if max_out is None:
        max_out = legacy
    if max_in is None and max_out is None:
        max_in = legacy
    if max_in is None and max_out is not None and legacy is not None:
        # an entry with an output cap and no input limit (a few in LiteLLM's map): LiteLLM serves it,
        # so the guard does too, within the only size it knows (the whole request inside the cap)
        max_in = max_out
    return max_in, max_out


def _mapped(
    model: str, real: str, model_map: Mapping[str, Any] | None, resolver: Resolver | None
) -> tuple[int | None, int | None, str]:
    """(input, output, source) from the map's exact entry, else `resolver`, else the raw map's
    entry without provider prefixes or lowercased; (None, None, "default") when none knows it."""
    exact = model_map.get(real) if model_map else None
    if isinstance(exact, Mapping) and _positive_int(exact.get("max_input_tokens") or exact.get("max_tokens")):
        return (*_io(exact), "model_map")
    resolved = _resolve(resolver, real) or (_resolve(resolver, model) if real != model else None)
    if resolved is not None:
        return (*_io(resolved), "litellm")
    entry = (lookup(model_map, real) or (lookup(model_map, model) if real != model else None)) if model_map else None
    if entry is not None:
        return (*_io(entry), "model_map")
    return None, None, "default"


def resolve_limits(
    model: str,
    policy: Policy,
    *,
    model_map: Mapping[str, Any] | None = None,
    model_info: Mapping[str, Any] | None = None,
    underlying: str | None = None,
    resolver: Resolver | None = None,
) -> ModelLimits:
    """Limits of `model` (a client-facing alias; `underlying` is the provider model behind it).

    Map order: the map's entry under the exact name; else `resolver` (the shells pass LiteLLM's own
    `get_model_info`, which knows provider routes, aliases and spellings the raw map does not); else
    the raw map's entry without provider prefixes or lowercased."""
    real = underlying or model
    info_in, info_out = _io(model_info) if model_info else (None, None)
    # the deployment's model_info may say both: then no map or resolver (LiteLLM's import) is needed
    max_in, max_out, source = (
        (None, None, "default") if info_in and info_out else _mapped(model, real, model_map, resolver)
    )
    if info_in or info_out:
        max_in, max_out = info_in or max_in, info_out or max_out
        source = "config"
    if max_in is None:
        if policy.default_context_window is None:
            raise UnknownModel(model)
        max_in, source = policy.default_context_window, "policy_default"
    rule: WindowRule = policy.window_rule or profile(real).rule
    for cap in (policy.context_window, policy.max_input_tokens):
        if cap is not None:
            max_in = min(max_in, cap)
    if max_out is None:
        max_out = max_in
    if policy.max_output_tokens is not None:
        max_out = min(max_out, policy.max_output_tokens)
    if max_in <= 0:
        raise PolicyError(f"policy leaves model {model!r} no input room")
    return ModelLimits(model=model, max_input_tokens=max_in, max_output_tokens=max_out, rule=rule, source=source)
