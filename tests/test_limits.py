from __future__ import annotations

import pytest

from guard.core.errors import UnknownModel
from guard.core.limits import resolve_limits
from guard.core.modelmap import bundled_model_map
from guard.core.policy import Policy

MAP = bundled_model_map()


@pytest.mark.parametrize(
    ("model", "entry", "rule"),
    [
        ("gpt-4o", "gpt-4o", "shared"),
        ("openai/gpt-4o", "gpt-4o", "shared"),  # provider prefix stripped for lookup
        ("azure/gpt-4o", "azure/gpt-4o", "shared"),
        ("gpt-5", "gpt-5", "separate"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5", "shared"),
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5", "shared"),
        ("gemini/gemini-2.5-pro", "gemini/gemini-2.5-pro", "separate"),
    ],
)
def test_model_map_limits_and_rules(model, entry, rule):
    """A name resolves to the installed map's entry (its numbers move between LiteLLM releases:
    gemini-2.5-pro's output cap is 65,535 in 1.102.4 and 65,536 in 1.106.2) and to its family's rule."""
    limits = resolve_limits(model, Policy(), model_map=MAP)
    want = MAP[entry]
    assert (limits.max_input_tokens, limits.max_output_tokens, limits.rule) == (
        want["max_input_tokens"],
        want["max_output_tokens"],
        rule,
    )
    assert limits.source == "model_map"


def test_separate_window_is_input_plus_output():
    assert resolve_limits("gpt-5", Policy(), model_map=MAP).context_window == 400_000


def test_config_model_info_overrides_the_map():
    limits = resolve_limits(
        "my-gpt", Policy(), model_map=MAP, model_info={"max_input_tokens": 50_000}, underlying="openai/gpt-4o"
    )
    assert (limits.max_input_tokens, limits.max_output_tokens, limits.source) == (50_000, 16_384, "config")


def test_legacy_max_tokens_is_the_output_cap():
    limits = resolve_limits("x", Policy(), model_map={"x": {"max_input_tokens": 8000, "max_tokens": 1000}})
    assert (limits.max_input_tokens, limits.max_output_tokens) == (8000, 1000)


def test_policy_caps_only_lower():
    tight = resolve_limits("gpt-4o", Policy(context_window=32_000, max_output_tokens=2000), model_map=MAP)
    assert (tight.max_input_tokens, tight.max_output_tokens) == (32_000, 2000)
    loose = resolve_limits("gpt-4o", Policy(context_window=1_000_000, max_output_tokens=1_000_000), model_map=MAP)
    assert (loose.max_input_tokens, loose.max_output_tokens) == (128_000, 16_384)


def test_policy_may_change_the_rule():
    assert resolve_limits("gpt-4o", Policy(window_rule="separate"), model_map=MAP).rule == "separate"


def test_unknown_model_is_an_error_unless_a_default_window_is_configured():
    with pytest.raises(UnknownModel, match="my-finetune"):
        resolve_limits("openai/my-finetune", Policy(), model_map=MAP)
    limits = resolve_limits("openai/my-finetune", Policy(default_context_window=32_768), model_map=MAP)
    assert (limits.max_input_tokens, limits.source, limits.rule) == (32_768, "policy_default", "shared")


def test_model_info_with_both_limits_never_asks_the_resolver():
    """A deployment whose model_info says both limits needs no map lookup or LiteLLM import (the
    CLI took 6-14 s importing LiteLLM for such configs); with one limit the resolver fills the other."""
    asked: list[str] = []

    def resolver(name: str):
        asked.append(name)
        return {"max_input_tokens": 100_000, "max_output_tokens": 4_000}

    both = resolve_limits(
        "gw",
        Policy(),
        model_map={},
        model_info={"max_input_tokens": 8192, "max_output_tokens": 1024},
        underlying="openai/gw",
        resolver=resolver,
    )
    assert (both.max_input_tokens, both.max_output_tokens, both.source, asked) == (8192, 1024, "config", [])
    one = resolve_limits(
        "gw", Policy(), model_map={}, model_info={"max_input_tokens": 8192}, underlying="openai/gw", resolver=resolver
    )
    assert (one.max_input_tokens, one.max_output_tokens, one.source, asked) == (8192, 4_000, "config", ["openai/gw"])
