"""Whether LiteLLM's Rust core serves Anthropic `/v1/messages` calls, and a check that it did: the
tests that run under `LITELLM_RUST=true` assert the Rust path was the one exercised."""

from __future__ import annotations

import os


def rust_serves_messages(switch: str | None = None) -> bool:
    """Whether a process with `LITELLM_RUST` set to `switch` (default: this process's) sends Anthropic
    `/v1/messages` calls through the Rust core: the switch is on and the installed release ships the
    core with that route opted in (1.108 on; 1.102 has no core)."""
    value = os.environ.get("LITELLM_RUST", "") if switch is None else switch
    if value.strip().lower() not in ("1", "true", "yes", "on"):
        return False
    try:
        from litellm.rust_bridge import _native  # noqa: F401  (the packaged core)
        from litellm.rust_bridge.catalog import RULES, Route
        from litellm.rust_bridge.configuration import Rollout
    except ImportError:
        return False
    return any(
        rule.route is Route.MESSAGES
        and rule.rollout is Rollout.RUST_OPT_IN
        and (rule.providers is None or "anthropic" in rule.providers)
        for rule in RULES
    )


def assert_served_by(headers: dict[str, str] | None, route: str, switch: str | None = None) -> None:
    """Where the Rust core serves messages, `headers` (a response's, or its hidden additional headers)
    must carry its `x-litellm-rust` mark."""
    if rust_serves_messages(switch):
        assert (headers or {}).get("x-litellm-rust") == "true", (
            f"LITELLM_RUST is on but {route} was not served by LiteLLM's Rust core: the Rust path went untested"
        )
