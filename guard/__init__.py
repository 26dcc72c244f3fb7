"""context-guard: make every LLM request fit its model before it leaves.

The core (engine, policy, errors, report) never imports LiteLLM; the LiteLLM adapter
(`ContextGuard`, `completion`) is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from guard.core.config import CacheSettings, Deployment, GuardConfig, HeavyFitSettings, SummarizerSettings
from guard.core.errors import BadRequest, ContextWindowExceeded, GuardError, PolicyError, Shortfall, UnknownModel
from guard.core.limits import ModelLimits
from guard.core.policy import Policy, PolicySet, load_policy_set
from guard.core.report import Action, Report, Skipped
from guard.fit.engine import Engine, FitRequest, Judged, Sources
from guard.fit.planner import Fitted, SummaryAnswer, SummaryRequest
from guard.shell.config_file import load_config  # (reads YAML; imports nothing of LiteLLM)

if TYPE_CHECKING:  # visible to type checkers; loaded lazily at run time (they import LiteLLM)
    from guard.shell.callback import (
        ContextGuard,
        ContextWindowExceededError,
        GuardFailed,
        completion,
        instrument,
        report_of,
        responses,
        uninstrument,
    )
    from guard.shell.summarizer import Summarizer, Summarizing
    from guard.state.cache import SummaryCache

_SHELL = {
    "ContextGuard": "guard.shell.callback",
    "ContextWindowExceededError": "guard.shell.callback",
    "GuardFailed": "guard.shell.callback",
    "instrument": "guard.shell.callback",
    "report_of": "guard.shell.callback",
    "uninstrument": "guard.shell.callback",
    "SummaryCache": "guard.state.cache",
    "Summarizer": "guard.shell.summarizer",
    "Summarizing": "guard.shell.summarizer",
    "completion": "guard.shell.callback",
    "responses": "guard.shell.callback",
}


def __getattr__(name: str) -> Any:
    if name in _SHELL:
        import importlib

        return getattr(importlib.import_module(_SHELL[name]), name)
    raise AttributeError(f"module 'guard' has no attribute {name!r}")


__all__ = [
    "Action",
    "BadRequest",
    "CacheSettings",
    "ContextGuard",
    "ContextWindowExceeded",
    "ContextWindowExceededError",
    "Deployment",
    "Engine",
    "FitRequest",
    "Fitted",
    "GuardConfig",
    "GuardError",
    "GuardFailed",
    "HeavyFitSettings",
    "Judged",
    "ModelLimits",
    "Policy",
    "PolicyError",
    "PolicySet",
    "Report",
    "Shortfall",
    "Skipped",
    "Sources",
    "Summarizer",
    "SummarizerSettings",
    "Summarizing",
    "SummaryAnswer",
    "SummaryCache",
    "SummaryRequest",
    "UnknownModel",
    "completion",
    "instrument",
    "load_config",
    "load_policy_set",
    "report_of",
    "responses",
    "uninstrument",
]
