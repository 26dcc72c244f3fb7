from __future__ import annotations

import pytest

from guard.core.errors import PolicyError
from guard.core.policy import load_policy_set


def test_flat_section_is_the_defaults():
    ps = load_policy_set({"default_max_tokens": 1000, "safety_margin_tokens": 64})
    assert ps.defaults.default_max_tokens == 1000 and ps.defaults.safety_margin_tokens == 64


def test_model_globs_override_in_order():
    ps = load_policy_set(
        {
            "defaults": {"default_max_tokens": 1000},
            "models": {"claude-*": {"default_max_tokens": 2000}, "*": {"default_max_tokens": 3000}},
        }
    )
    assert ps.for_model("claude-sonnet-4-5").default_max_tokens == 2000
    assert ps.for_model("gpt-4o").default_max_tokens == 3000
    assert (
        ps.for_model("alias", "anthropic/claude-x").default_max_tokens == 3000
    )  # first matching glob wins: '*' matches 'alias'


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


def _set():
    return load_policy_set(
        {
            "defaults": {"default_max_tokens": 4096, "max_output_tokens": 8000, "safety_margin_tokens": 512},
            "models": {"claude-*": {"default_max_tokens": 2048}},
            "teams": {"team-a": {"max_output_tokens": 1000, "strategies": ["compact_json", "drop_oldest_turns"]}},
            "keys": {"alice": {"max_output_tokens": 500, "safety_margin_tokens": 100}},
        }
    )


def test_precedence_defaults_model_team_key():
    policy, layers = _set().resolve(("claude-x",), team=("team-a",), key=("alice",))
    assert policy.default_max_tokens == 2048
    assert policy.max_output_tokens == 500
    assert policy.safety_margin_tokens == 512  # a key cannot shrink the margin
    assert policy.strategies == ["compact_json", "drop_oldest_turns"]
    assert layers == ["model", "team:team-a", "key:alice"]


def test_lower_layers_cannot_lift_caps():
    ps = load_policy_set({"defaults": {"max_output_tokens": 1000}, "teams": {"t": {"max_output_tokens": 50_000}}})
    assert ps.resolve(("m",), team=("t",))[0].max_output_tokens == 1000


def test_client_hints_only_tighten_and_cannot_touch_other_fields():
    ps = _set()
    base, _ = ps.resolve(("m",), team=("team-a",))
    hints = {
        "max_output_tokens": 10**6,
        "safety_margin_tokens": 0,
        "strategies": ["truncate_recent_tool_results"],
        "keep_recent_groups": 0,
        "on_error": "open",
        "calibration": {"openai": 0.5},
        "default_context_window": 10**7,
    }
    policy, layers = ps.resolve(("m",), team=("team-a",), client=hints)
    assert policy.max_output_tokens == base.max_output_tokens
    assert policy.safety_margin_tokens == base.safety_margin_tokens
    assert policy.strategies == []  # the intersection: nothing the team did not allow
    assert policy.keep_recent_groups == base.keep_recent_groups and policy.default_context_window is None
    assert policy.calibration.get("openai", 1.0) >= 1.0
    assert layers[-1] == "client"
    tight, _ = ps.resolve(("m",), client={"max_output_tokens": 64, "safety_margin_tokens": 2000})
    assert (tight.max_output_tokens, tight.safety_margin_tokens) == (64, 2000)


def test_trusted_metadata_overrides_apply_after_the_tables():
    policy, layers = _set().resolve(("m",), trusted=({"max_output_tokens": 300, "keep_recent_groups": 5},))
    assert (policy.max_output_tokens, policy.keep_recent_groups, layers) == (300, 5, ["metadata"])


def test_bad_team_policy_is_refused_at_load():
    with pytest.raises(PolicyError, match="teams"):
        load_policy_set({"teams": {"t": {"safety_margin_tokens": -5}}})
    with pytest.raises(PolicyError, match="teams"):
        load_policy_set({"teams": {"t": {"no_such_field": 1}}})
