from __future__ import annotations

import pytest

from guard.errors import PolicyError
from guard.policy import load_policy_set


def test_flat_section_is_the_defaults():
    ps = load_policy_set({"default_max_tokens": 1000, "safety_margin_tokens": 64})
    assert ps.defaults.default_max_tokens == 1000 and ps.defaults.safety_margin_tokens == 64


def test_model_globs_override_in_order():
    ps = load_policy_set({"defaults": {"default_max_tokens": 1000}, "models": {"claude-*": {"default_max_tokens": 2000}, "*": {"default_max_tokens": 3000}}})
    assert ps.for_model("claude-sonnet-4-5").default_max_tokens == 2000
    assert ps.for_model("gpt-4o").default_max_tokens == 3000
    assert ps.for_model("alias", "anthropic/claude-x").default_max_tokens == 3000  # first matching glob wins: '*' matches 'alias'


@pytest.mark.parametrize(
    ("section", "fragment"),
    [
        ({"low_water_ratio": 1.5}, "low_water_ratio"),
        ({"calibration": {"anthropic": 0.8}}, "under-count"),
        ({"strategies": ["compact_json", "burn_it"]}, "strategies"),
        ({"unknown_knob": 1}, "unknown_knob"),
        ({"models": {"gpt-*": {"safety_margin_tokens": -1}}}, "gpt-*"),
        ({"defaults": {}, "default_max_tokens": 5}, "defaults"),
        ({"min_output_tokens": 500, "max_output_tokens": 100}, "min_output_tokens"),
    ],
)
def test_invalid_policies_are_refused_with_the_field_named(section, fragment):
    with pytest.raises(PolicyError, match="(?s)" + fragment.replace("*", r"\*")):
        load_policy_set(section)
