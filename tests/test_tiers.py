"""Routing tiers (`guard.shell.routing`: whole, cut or none) are checks, not turns: a check does not
replay the history's past turns (a prefix fit per past crossing, for nothing under the lossless
policy) and records nothing of the conversation, and it says what full fits say."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import given, settings

from guard.core.config import Deployment
from guard.core.errors import ContextWindowExceeded
from guard.core.policy import Policy, PolicySet
from guard.fit.engine import Engine
from guard.shell import routing
from tests.strategies import long_agent_loop
from tests.test_properties import UNDERLYING

EXAMPLES = {"ci": 60, "dev": 20}.get(os.environ.get("HYPOTHESIS_PROFILE", "ci"), 1000)


def _engine(dialect: str, window: int, case: dict[str, Any], strategies: list[str] | None) -> Engine:
    policy = Policy(keep_recent_groups=case["keep_recent_groups"], safety_margin_tokens=0, safety_margin_ratio=0.0)
    if strategies is not None:
        policy = policy.model_copy(update={"strategies": strategies})
    info = {"max_input_tokens": window, "max_output_tokens": case["max_output"]}
    deployments = {"tiny": Deployment("tiny", UNDERLYING[dialect], info)}
    return Engine(PolicySet(defaults=policy), deployments=deployments, model_map={})


def _fits(engine: Engine, body: dict[str, Any], policy: Policy, dialect: str) -> bool:
    try:
        engine.fit(body, dialect=dialect, policy=policy, deployment=engine.deployments["tiny"])
        return True
    except ContextWindowExceeded:
        return False


@settings(max_examples=EXAMPLES, deadline=None)
@given(long_agent_loop())
def test_a_tier_is_what_full_fits_say_and_the_check_records_nothing(case):
    body, settings_ = case
    dialect = settings_["dialect"]
    full = _engine(dialect, 10**7, settings_, None).fit(body, dialect=dialect).report.input_tokens_before
    # windows from a tenth of the loop (even the lossy steps may not reach it) to all of it
    for share, strategies in ((0.1, None), (settings_["share"], None), (0.9, None), (0.5, ["compact_json"])):
        window = int(full * share) + settings_["max_output"]
        checked = _engine(dialect, window, settings_, strategies)
        policy = checked.policy_for("tiny")
        (verdict,) = routing.best_tiers(checked, body, [checked.deployments["tiny"]], [policy], dialect)
        assert len(checked.conversations._seen) == 0  # a check is not a turn sent
        fitted = _engine(dialect, window, settings_, strategies)  # full fits, the replay included
        expected = (
            routing.WHOLE
            if _fits(fitted, body, routing.lossless(policy), dialect)
            else routing.CUT
            if _fits(fitted, body, policy, dialect)
            else routing.NONE
        )
        assert verdict.tier == expected, (share, strategies)


def test_where_one_deployment_takes_a_body_whole_the_others_are_not_checked_after_cuts(monkeypatch):
    body = {"model": "tiny", "messages": [{"role": "user", "content": "word " * 3000}]}
    case = {"keep_recent_groups": 1, "max_output": 256}
    small, big = (_engine("openai", w, case, None) for w in (2000, 20000))
    candidates = [small.deployments["tiny"], Deployment("big", "gpt-4o", big.deployments["tiny"].model_info)]
    policy = small.policy_for("tiny")
    after: list[str] = []
    real = routing.after_cuts
    monkeypatch.setattr(routing, "after_cuts", lambda e, b, d, p, x: after.append(d.model_name) or real(e, b, d, p, x))
    tiers = [v.tier for v in routing.best_tiers(small, body, candidates, [policy, policy], "openai")]
    assert tiers == [routing.CUT, routing.WHOLE] and after == []
    assert [
        v.deployment for v in routing.best(routing.best_tiers(small, body, candidates, [policy] * 2, "openai"))
    ] == [candidates[1]]
    (alone,) = routing.best_tiers(small, body, candidates[:1], [policy], "openai")
    assert alone.tier in (routing.CUT, routing.NONE) and after == ["tiny"]
