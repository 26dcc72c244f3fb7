"""LiteLLM's model map (context windows and output caps) without importing litellm.

The proxy and SDK shells pass `litellm.model_cost` (which may have been updated at run time); the
CLI and the core read the map file bundled in the installed litellm package, which costs
milliseconds where `import litellm` costs seconds.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

BUNDLED = "model_prices_and_context_window_backup.json"


@lru_cache(maxsize=1)
def bundled_model_map() -> Mapping[str, Any]:
    """The installed litellm's model map; {} if litellm is not installed."""
    loaded = sys.modules.get("litellm")
    if loaded is not None and isinstance(getattr(loaded, "model_cost", None), dict):
        return loaded.model_cost
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return {}
    path = Path(spec.origin).parent / BUNDLED
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}
