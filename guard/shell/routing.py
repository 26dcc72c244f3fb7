"""What LiteLLM's router may do with a request: the deployments of a model group and its
context-window fallbacks, and which of them can take a body (whole, or after the allowed steps).

Pure over what it is given: the router is read through `guard.shell.router_api` only (its
deployments and its `context_window_fallbacks`), and fitting goes through the engine, so a fake router
(a list of model_list entries) tests it without LiteLLM.

Tiers, best first:
- WHOLE: the body fits with lossless steps only (compact JSON, exact dedupe, clamp_output);
- CUT: it fits after the lossy steps the policy allows;
- NONE: nothing makes it fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard.core.config import Deployment
from guard.core.errors import ContextWindowExceeded, GuardError
from guard.core.policy import Policy
from guard.fit.engine import Engine, FitRequest, Judged
from guard.fit.planner import run
from guard.fit.temperature import Temperature
from guard.shell import router_api

WHOLE, CUT, NONE = 0, 1, 2
LOSSLESS_STEPS = ("clamp_output", "compact_json", "dedupe")


def lossless(policy: Policy) -> Policy:
    """The policy with only the steps that keep every message's meaning."""
    return policy.model_copy(update={"strategies": [s for s in policy.strategies if s in LOSSLESS_STEPS]})


def deployments(router: Any, group: str) -> list[Deployment]:
    """Every deployment of a model group, each with its own model_info (not the group's minimum)."""
    if router is None or not isinstance(group, str):
        return []
    try:
        entries = router_api.model_list(router, group)
    except Exception:
        return []
    return from_entries(entries, group)


def from_entries(entries: Sequence[Any], group: str) -> list[Deployment]:
    """The deployments of model_list entries (what a router lists, or hands a routing filter)."""
    out = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        params = entry.get("litellm_params") or {}
        info = entry.get("model_info") or {}
        real = params.get("model") if isinstance(params, Mapping) else None
        base = params.get("api_base") if isinstance(params, Mapping) else None
        out.append(
            Deployment(
                group,
                real if isinstance(real, str) else group,
                dict(info) if isinstance(info, Mapping) else {},
                base if isinstance(base, str) else "",
            )
        )
    return out


def context_fallbacks(router: Any, group: str | None) -> list[str]:
    """The groups `context_window_fallbacks` sends an over-long request on `group` to, in order."""
    fallbacks = router_api.setting(router, "context_window_fallbacks")
    if not fallbacks or not isinstance(group, str):
        return []
    for entry in fallbacks:
        if isinstance(entry, Mapping) and group in entry:
            chain = entry[group]
            return [g for g in (chain if isinstance(chain, list) else [chain]) if isinstance(g, str)]
    return []


def limits_key(d: Deployment) -> tuple[Any, ...]:
    info = d.model_info
    return (d.model, info.get("max_input_tokens"), info.get("max_output_tokens"), info.get("max_tokens"))


@dataclass(frozen=True)
class Verdict:
    deployment: Deployment
    tier: int
    error: ContextWindowExceeded | None = None  # why it cannot take the body (tier NONE)


def after_cuts(
    engine: Engine, body: Mapping[str, Any], deployment: Deployment, policy: Policy, dialect: Any
) -> Verdict:
    """The tier of a deployment that does not take the body whole (`whole`): CUT or NONE (no
    summaries: they need I/O; a body that needs one fits after the deterministic steps anyway, or
    the summary would not be asked for)."""
    try:
        _check(engine, body, deployment, policy, dialect)
        return Verdict(deployment, CUT)
    except ContextWindowExceeded as e:
        return Verdict(deployment, NONE, e)
    except GuardError:
        return Verdict(deployment, NONE)


def whole(engine: Engine, body: Mapping[str, Any], deployment: Deployment, policy: Policy, dialect: Any) -> bool:
    """Whether the deployment takes the body whole (the WHOLE tier; bad bodies raise GuardError)."""
    try:
        _check(engine, body, deployment, lossless(policy), dialect)
        return True
    except ContextWindowExceeded:
        return False


def _check(engine: Engine, body: Mapping[str, Any], deployment: Deployment, policy: Policy, dialect: Any) -> None:
    """A fit for its verdict only (raises ContextWindowExceeded when the body cannot fit): without
    the replay of the history's past turns, which places the cut but never decides whether one
    fits (where no carried cut fits, the whole request is fitted), and which under a lossless
    policy tries a prefix fit per past crossing for nothing (a real loop's overflowing turn:
    0.1-1.5 s, against 30-70 ms for its fit); nothing recorded of the conversation (a check is
    not a turn sent: its record would hand the fit that follows a cut made for another window)."""
    judged = Judged(temperature=Temperature("warm"))
    request = FitRequest(body, deployment.model_name, dialect, policy, deployment, judged=judged, replay=False)
    run(engine.plan_for(request), None)


def best_tiers(
    engine: Engine, body: Mapping[str, Any], candidates: Sequence[Deployment], policies: Sequence[Policy], dialect: Any
) -> list[Verdict]:
    """Each candidate's verdict (each with its policy), as far as `best` reads them: where one takes
    the body whole, the others are CUT without their check after cuts (`best` keeps the whole ones
    whatever the others' tier; the lossless check is the cheap one)."""
    taken = [whole(engine, body, d, p, dialect) for d, p in zip(candidates, policies)]
    if any(taken):
        return [Verdict(d, WHOLE if w else CUT) for d, w in zip(candidates, taken)]
    return [after_cuts(engine, body, d, p, dialect) for d, p in zip(candidates, policies)]


def first_taker(
    engine: Engine,
    body: Mapping[str, Any],
    named: Sequence[tuple[str, Deployment]],
    policies: Sequence[Policy],
    dialect: Any,
) -> list[tuple[str, Verdict]]:
    """The first of the (model group, deployment) candidates, each with its policy, that takes the
    body whole, else the first that can after cuts (a lossless check each before any after cuts);
    where none can, every one's verdict (NONE, with its error)."""
    for (name, d), policy in zip(named, policies):
        if whole(engine, body, d, policy, dialect):
            return [(name, Verdict(d, WHOLE))]
    out = []
    for (name, d), policy in zip(named, policies):
        v = after_cuts(engine, body, d, policy, dialect)
        if v.tier != NONE:
            return [(name, v)]
        out.append((name, v))
    return out


def best(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts of the best tier present (all of them if every one is NONE)."""
    if not verdicts:
        return []
    top = min(v.tier for v in verdicts)
    return [v for v in verdicts if v.tier == top]
