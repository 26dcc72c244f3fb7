"""context-guard: make every LLM request fit its model before it leaves.

The core (engine, policy, errors, report) never imports LiteLLM; the LiteLLM adapter
(`ContextGuard`, `completion`) is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from guard.config import CacheSettings, Deployment, GuardConfig, SummarizerSettings, load_config
from guard.engine import Engine
from guard.errors import BadRequest, ContextWindowExceeded, GuardError, PolicyError, Shortfall, UnknownModel
from guard.limits import ModelLimits
from guard.planner import Fitted, SummaryAnswer, SummaryRequest
from guard.policy import Policy, PolicySet, load_policy_set
from guard.report import Action, Report, Skipped

if TYPE_CHECKING:  # visible to type checkers; loaded lazily at run time (they import LiteLLM)
    from guard.cache import SummaryCache
    from guard.callback import (
        ContextGuard,
        ContextWindowExceededError,
        GuardFailed,
        completion,
        instrument,
        report_of,
        responses,
        uninstrument,
    )
    from guard.summarizer import Summarizer

_SHELL = {
    "ContextGuard": "guard.callback",
    "ContextWindowExceededError": "guard.callback",
    "GuardFailed": "guard.callback",
    "instrument": "guard.callback",
    "report_of": "guard.callback",
    "uninstrument": "guard.callback",
    "SummaryCache": "guard.cache",
    "Summarizer": "guard.summarizer",
    "completion": "guard.callback",
    "responses": "guard.callback",
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
    "Fitted",
    "GuardConfig",
    "GuardError",
    "GuardFailed",
    "ModelLimits",
    "Policy",
    "PolicyError",
    "PolicySet",
    "Report",
    "Shortfall",
    "Skipped",
    "Summarizer",
    "SummarizerSettings",
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
