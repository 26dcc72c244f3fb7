"""Model parity with LiteLLM (issue 11, item 5): a model LiteLLM can serve is never refused as
unknown, and the guard's limits are LiteLLM's. Swept over every chat model in LiteLLM's map, under
its key and its `provider/model` spelling, through the engine the shells build."""

from __future__ import annotations

import contextlib
import io

import litellm
import pytest

from guard.core.errors import UnknownModel
from guard.core.policy import PolicySet
from guard.fit.engine import Engine
from guard.shell.callback import litellm_model_info


def _names() -> list[str]:
    out = []
    for key, entry in litellm.model_cost.items():
        if not isinstance(entry, dict) or entry.get("mode") != "chat":
            continue
        out.append(key)
        provider = entry.get("litellm_provider")
        if isinstance(provider, str) and not key.startswith(provider + "/"):
            out.append(f"{provider}/{key}")
    return out


def _litellm(name: str) -> dict | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            info = litellm.get_model_info(name)
    except Exception:
        return None
    return info if (info.get("max_input_tokens") or info.get("max_tokens")) else None


ENGINES = {
    "the shells' engine": lambda: Engine(PolicySet(), model_map=litellm.model_cost, resolver=litellm_model_info),
    # issue 25, item 4: the exported Engine() resolves names as the hooks and the CLI do (it
    # refused anthropic/claude-sonnet-4-20250514 and -opus-4-20250514 as unknown)
    "Engine()": lambda: Engine(),
}


@pytest.mark.parametrize("make", list(ENGINES.values()), ids=list(ENGINES))
def test_every_chat_model_litellm_serves_gets_litellms_window(make):
    engine = make()
    policy = engine.policies.defaults
    names = _names()
    assert len(names) > 2000
    refused, different, checked = [], [], 0
    for name in names:
        info = _litellm(name)
        if info is None:
            continue  # LiteLLM cannot serve it either
        checked += 1
        try:
            limits = engine.limits_for(name, policy)
        except UnknownModel:
            refused.append(name)
            continue
        want_out = info.get("max_output_tokens") or info.get("max_tokens")
        # LiteLLM's window: max_input_tokens; its legacy max_tokens when that is all an entry has
        want_in = info.get("max_input_tokens") or (
            info.get("max_tokens") if not info.get("max_output_tokens") else None
        )
        if want_in is None:
            continue  # LiteLLM knows no input limit: served (not refused), within the output cap
        if (limits.max_input_tokens, limits.max_output_tokens) != (want_in, want_out or want_in):
            different.append((name, limits.max_input_tokens, limits.max_output_tokens, want_in, want_out))
    assert checked > 2000
    assert refused == [], refused[:20]
    assert different == [], different[:20]


@pytest.mark.parametrize("make", list(ENGINES.values()), ids=list(ENGINES))
@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-20250514", "anthropic/claude-opus-4-20250514"])
def test_the_incident_model_is_known(model, make):
    """The incident's model family, with the window the installed LiteLLM gives it (the exact
    figures move between LiteLLM releases: 200,000 / 64,000 in 1.106)."""
    engine = make()
    limits = engine.limits_for(model, engine.policies.defaults)
    info = _litellm(model)
    assert info is not None
    assert (limits.max_input_tokens, limits.max_output_tokens) == (info["max_input_tokens"], info["max_output_tokens"])
