"""Reading a LiteLLM proxy config file: model_list limits and the `context_guard:` policy section."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from guard.errors import PolicyError
from guard.policy import PolicySet, load_policy_set


@dataclass(frozen=True)
class Deployment:
    """What the guard needs of one model_list entry."""

    model_name: str
    model: str
    model_info: Mapping[str, Any]


@dataclass(frozen=True)
class GuardConfig:
    policies: PolicySet
    deployments: Mapping[str, Deployment]


def parse_model_list(model_list: Any) -> dict[str, Deployment]:
    """model_name -> its deployment: the first entry's real model, and per limit the smallest
    value any entry of that name configures (a load-balanced alias is as small as its smallest)."""
    if model_list is None:
        return {}
    if not isinstance(model_list, list):
        raise PolicyError("model_list must be a list")
    out: dict[str, Deployment] = {}
    for i, entry in enumerate(model_list):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("model_name"), str):
            raise PolicyError(f"model_list[{i}] needs a model_name")
        params = entry.get("litellm_params") or {}
        info = entry.get("model_info") or {}
        if not isinstance(params, Mapping) or not isinstance(info, Mapping):
            raise PolicyError(f"model_list[{i}]: litellm_params and model_info must be mappings")
        real = params.get("model") if isinstance(params.get("model"), str) else entry["model_name"]
        name = entry["model_name"]
        if name not in out:
            out[name] = Deployment(name, real, dict(info))
            continue
        merged = dict(out[name].model_info)
        for key in ("max_input_tokens", "max_output_tokens", "max_tokens"):
            values = [v for v in (merged.get(key), info.get(key)) if isinstance(v, int) and v > 0]
            if values:
                merged[key] = min(values)
        out[name] = Deployment(name, out[name].model, merged)
    return out


def parse_config(data: Mapping[str, Any]) -> GuardConfig:
    if not isinstance(data, Mapping):
        raise PolicyError("the config file must hold a mapping")
    section = data.get("context_guard")
    if section is not None and not isinstance(section, Mapping):
        raise PolicyError("context_guard must be a mapping")
    return GuardConfig(load_policy_set(section), parse_model_list(data.get("model_list")))


def load_config(path: str | Path) -> GuardConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"cannot read config {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise PolicyError(f"config {path} is not valid YAML: {e}") from None
    return parse_config(data)
