"""At start-up, the settings in a LiteLLM config (and environment) that route requests around the
guard's hooks, said once in the log with what each means and what to do.

- `LITELLM_RUST` on, or a model with `rust: true`: LiteLLM's Rust core serves those calls (Anthropic
  `/v1/messages` from 1.108). On the tested releases it runs the guard's hooks there
  (tests/e2e/test_hook_contract.py runs under `LITELLM_RUST=true` on each); a route it serves without
  them is counted in `context_guard_unguarded_calls_total` (guard.shell.unguarded).
- `general_settings.pass_through_endpoints`: forwarded as is; the guard counts the prompts it sees
  there, or refuses them under `on_unguarded: refuse`.
- The guard registered only as a logging callback (`success_callback`, `failure_callback`,
  `input_callback`) and not in `callbacks`: its fitting hooks never run.

Findings hold model names, paths and setting names, never request text."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from guard.state import telemetry

_ON = ("1", "true", "yes", "on")
_LOGGING_ONLY = ("success_callback", "failure_callback", "input_callback")
_said: set[str] = set()


def _guard_named(entry: Any) -> bool:
    return isinstance(entry, str) and ("context_guard" in entry or entry.startswith("guard."))


def _rust_models(config: Mapping[str, Any]) -> list[str]:
    names = []
    for entry in config.get("model_list") or []:
        if not isinstance(entry, Mapping):
            continue
        params, info = entry.get("litellm_params") or {}, entry.get("model_info") or {}
        if any(isinstance(p, Mapping) and str(p.get("rust", "")).strip().lower() in _ON for p in (params, info)):
            names.append(str(entry.get("model_name")))
    return names


def route_arounds(config: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """What in `config` (a LiteLLM config, parsed) and `environ` routes requests around the guard's hooks."""
    found = []
    if environ.get("LITELLM_RUST", "").strip().lower() in _ON:
        found.append(
            "LITELLM_RUST is on: LiteLLM's Rust core serves the calls it has taken over (Anthropic /v1/messages); "
            "the guard's hooks run there on the tested LiteLLM releases, and a call served without them is counted "
            "in context_guard_unguarded_calls_total"
        )
    rust = _rust_models(config)
    if rust:
        found.append(
            f"models with rust: true ({', '.join(sorted(rust))}) are served by LiteLLM's Rust core where it has the "
            "route; the guard's hooks run there on the tested releases, and a call served without them is counted "
            "in context_guard_unguarded_calls_total"
        )
    general = config.get("general_settings") or {}
    paths = [str(e.get("path")) for e in general.get("pass_through_endpoints") or [] if isinstance(e, Mapping)]
    if paths:
        found.append(
            f"pass_through_endpoints ({', '.join(sorted(paths))}) forward request bodies as is: the guard cannot fit "
            "them; it counts the prompts it sees there, or refuses them where the policy says on_unguarded: refuse"
        )
    settings = config.get("litellm_settings") or {}
    fitting = any(_guard_named(c) for c in settings.get("callbacks") or [])
    logging_only = [name for name in _LOGGING_ONLY if any(_guard_named(c) for c in settings.get(name) or [])]
    if logging_only and not fitting:
        found.append(
            f"the guard is registered in litellm_settings.{logging_only[0]} but not in litellm_settings.callbacks: "
            "its fitting hooks never run; list it under callbacks"
        )
    return found


def check_config(path: str | Path, environ: Mapping[str, str]) -> list[str]:
    """The findings for a config file, each logged once per process (a file that cannot be read is
    load_config's to report)."""
    try:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    found = route_arounds(config, environ) if isinstance(config, Mapping) else []
    for finding in found:
        if finding not in _said:
            _said.add(finding)
            telemetry.log.warning("context-guard start-up check: %s.", finding)
    return found
