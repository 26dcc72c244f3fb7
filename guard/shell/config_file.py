"""Reading a LiteLLM proxy config file: its YAML parsed and validated (`guard.core.config`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from guard.core.config import GuardConfig, parse_config
from guard.core.errors import PolicyError


def load_config(path: str | Path) -> GuardConfig:
    """Read and validate a LiteLLM config file's `context_guard:` section and `model_list`
    (raises PolicyError naming the bad field)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError(f"cannot read config {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise PolicyError(f"config {path} is not valid YAML: {e}") from None
    return parse_config(data)
