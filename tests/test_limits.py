from __future__ import annotations

import pytest

from guard.errors import UnknownModel
from guard.limits import resolve_limits
from guard.modelmap import bundled_model_map
from guard.policy import Policy

MAP = bundled_model_map()


@pytest.mark.parametrize(
    ("model", "max_in", "max_out", "rule"),
    [
        ("gpt-4o", 128_000, 16_384, "shared"),
        ("openai/gpt-4o", 128_000, 16_384, "shared"),  # provider prefix stripped for lookup
        ("azure/gpt-4o", 128_000, 16_384, "shared"),
        ("gpt-5", 272_000, 128_000, "separate"),
        ("claude-sonnet-4-5", 200_000, 64_000, "shared"),
        ("anthropic/claude-sonnet-4-5", 200_000, 64_000, "shared"),
        ("gemini/gemini-2.5-pro", 1_048_576, 65_536, "separate"),
    ],
)
def test_model_map_limits_and_rules(model, max_in, max_out, rule):
    limits = resolve_limits(model, Policy(), model_map=MAP)
    assert (limits.max_input_tokens, limits.max_output_tokens, limits.rule) == (max_in, max_out, rule)
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
