from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.core.budget import Budget, make_budget, requested_output
from guard.core.errors import BadRequest
from guard.core.limits import ModelLimits
from guard.core.policy import Policy

SHARED = ModelLimits("m", 200_000, 64_000, "shared", "test")
SEPARATE = ModelLimits("m", 272_000, 128_000, "separate", "test")


def test_incident_one_reserves_the_output():
    # 143,543 input + 64,000 output > 200,000: the check must fail before the provider does
    budget, source = make_budget(SHARED, Policy(), 64_000)
    assert source == "request"
    assert budget.margin == 2000
    assert budget.room == 200_000 - 64_000 - 2000
    assert not budget.fits(143_543)


def test_separate_rule_does_not_subtract_the_output():
    budget, _ = make_budget(SEPARATE, Policy(), 100_000)
    assert budget.room == 272_000 - 2720
    assert budget.reserved_output == 100_000


def test_a_budget_for_another_room_of_the_same_conversation_moves_only_its_reserved_output():
    """A cut made for a turn whose `max_tokens` was another is made again for that turn's room."""
    now, _ = make_budget(SHARED, Policy(), 8_000)
    then = now.with_room(now.room - 3_000)
    assert (then.room, then.reserved_output, then.margin) == (now.room - 3_000, 11_000, now.margin)
    assert then.band < now.band and then.target < now.target  # (its geometry is that room's)
    assert now.with_room(now.room) is now and now.with_room(now.room + 8_000) is now  # (no output would leave it)
    separate, _ = make_budget(SEPARATE, Policy(), 100_000)
    assert separate.with_room(separate.room - 3_000) is separate  # (its room does not depend on the output)


def test_output_default_and_clamping():
    assert make_budget(SHARED, Policy(), None)[0].reserved_output == 4096
    assert make_budget(SHARED, Policy(default_max_tokens=100_000), None) == (
        make_budget(SHARED, Policy(), 64_000)[0],
        "policy_default",
    )
    budget, source = make_budget(SHARED, Policy(max_output_tokens=8000), 20_000)
    assert (budget.reserved_output, source) == (8000, "clamped_to_cap")


@pytest.mark.parametrize("bad", [0, -5, "100", 1.5, True])
def test_invalid_max_tokens_is_a_bad_request(bad):
    with pytest.raises(BadRequest):
        requested_output({"max_tokens": bad}, "max_tokens")


def test_max_completion_tokens_falls_back_to_max_tokens():
    assert requested_output({"max_tokens": 77}, "max_completion_tokens") == 77


@given(st.integers(1000, 10**6), st.floats(0.5, 1.0), st.integers(1, 10**7))
def test_stop_mark_lies_in_the_band_below_the_target(room, ratio, total):
    budget = Budget(ModelLimits("m", room, room, "separate", "t"), 1, 0, ratio)
    stop = budget.stop_at(total)
    if total <= budget.room:
        assert stop == total
        return
    band = max(1, math.floor(budget.room * budget.quantum_ratio))
    assert budget.band == band
    assert budget.target - band < stop <= budget.target


@given(st.integers(10_000, 10**6), st.integers(1, 10**7), st.integers(0, 10**5))
def test_growing_conversations_get_the_same_cut_within_a_band(room, total, growth):
    budget = Budget(ModelLimits("m", room, room, "separate", "t"), 1, 0, 0.9)
    a, b = total + room, total + room + growth
    band = budget.band
    cut_a, cut_b = a - budget.stop_at(a), b - budget.stop_at(b)
    assert cut_b >= cut_a and (cut_b - cut_a) % band == 0
    assert cut_b - cut_a <= growth + band


def test_both_openai_output_names_are_read_and_both_are_clamped():
    from guard.core.config import Deployment
    from guard.core.policy import PolicySet
    from guard.fit.engine import Engine

    assert requested_output({"max_tokens": 10, "max_completion_tokens": 5000}, "max_completion_tokens") == 5000
    assert requested_output({"max_tokens": 5000, "max_completion_tokens": 10}, "max_completion_tokens") == 5000
    with pytest.raises(BadRequest, match="max_tokens"):
        requested_output({"max_tokens": "lots", "max_completion_tokens": 10}, "max_completion_tokens")
    engine = Engine(
        PolicySet(defaults=Policy(max_output_tokens=64)),
        deployments={"m": Deployment("m", "gpt-4o", {"max_input_tokens": 8000, "max_output_tokens": 4000})},
        model_map={},
    )
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 5000,
        "max_completion_tokens": 5000,
    }
    out = engine.fit(body).body
    assert out["max_tokens"] == out["max_completion_tokens"] == 64  # neither name lifts the cap
