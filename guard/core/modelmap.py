"""LiteLLM's model map (context windows and output caps) without importing litellm.

The proxy and SDK shells pass `litellm.model_cost` (which may have been updated at run time); the
CLI and the core read the map file bundled in the installed litellm package, which costs
milliseconds where `import litellm` costs seconds.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

BUNDLED = "model_prices_and_context_window_backup.json"


@lru_cache(maxsize=1)
def bundled_model_map() -> Mapping[str, Any]:
    """The installed litellm's model map; {} if litellm is not installed."""
    loaded = sys.modules.get("litellm")
    if loaded is not None and isinstance(getattr(loaded, "model_cost", None), dict):
        return cast("Mapping[str, Any]", loaded.model_cost)
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return {}
    path = Path(spec.origin).parent / BUNDLED
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


def litellm_available() -> bool:
    """Whether LiteLLM is installed (without importing it)."""
    return "litellm" in sys.modules or importlib.util.find_spec("litellm") is not None


def litellm_resolver(model: str) -> Mapping[str, Any] | None:
    """LiteLLM's own resolution of a model's limits (`get_model_info`: provider routes, aliases and
    spellings the raw map does not hold exactly), quietly. LiteLLM is imported on first use only
    (a few seconds), so names the map holds exactly never pay for it; None without LiteLLM."""
    import contextlib
    import io
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError:
        return None
    with contextlib.redirect_stdout(io.StringIO()):
        info = litellm.get_model_info(model)
    return dict(info) if info else None
