"""The work of the LiteLLM hooks: fit a request to the deployment that serves it, inside the
proxy's or the Router's routing (groups of mixed windows, `context_window_fallbacks`), driving
the planner with the summarizer, and turning its outcome into what LiteLLM expects (the fitted
body, a route-shaped refusal, a clear 400, or the policy's choice when the guard itself fails).

Functions take the guard's services (guard.shell.services: its engine, summarizer, stores and router).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import litellm

from guard.core import coexistence
from guard.core.config import Deployment, parse_model_list
from guard.core.errors import ContextWindowExceeded, GuardError
from guard.core.identity import STATE_KEY, Identity, identity_from_metadata
from guard.core.policy import Policy
from guard.fit import temperature
from guard.fit.engine import FitRequest, Judged
from guard.fit.planner import Fitted, Plan
from guard.shell import records, repeats, router_api, routes, routing
from guard.shell.driving import drive, off_loop
from guard.shell.routes import Route
from guard.shell.services import Attempt
from guard.state import telemetry

if TYPE_CHECKING:
    from guard.shell.services import Services


class GuardFailed(RuntimeError):
    """A bug in the guard refused the request (`on_error: closed`); a server error, never text."""


class _FallBack(Exception):
    def __init__(self, target: str) -> None:
        self.target = target


class _Repeat(Exception):
    """The pass would repeat the previous one (`repeats.holds`): its answer stands."""


# -- the hooks' entry points ---------------------------------------------------------------------


async def before_routing(cg: Services, data: dict[str, Any], route: Route, identity: Identity) -> dict[str, Any]:
    """The proxy's pre-call pass: fit a single-deployment group now; for a group of mixed windows
    or with context fallbacks, only refuse what none of them can take (each attempt is fitted to
    its own deployment after routing)."""
    alias = data.get("model")
    router = cg.router()
    group = routing.deployments(router, alias) if isinstance(alias, str) else []
    chain = routing.context_fallbacks(router, alias if isinstance(alias, str) else None)
    if chain or len({routing.limits_key(d) for d in group}) > 1:
        return await check_candidates(cg, data, route, Attempt("proxy", identity, alias=str(alias), chain=chain), group)
    attempt = Attempt("proxy", identity, router_deployment(alias, router), fresh=True)
    return await cg._guard(data, route, attempt)


async def for_deployment(cg: Services, kwargs: dict[str, Any], route: Route) -> dict[str, Any]:
    """Each attempt (and fallback), fitted to the deployment LiteLLM picked."""
    md = kwargs.get(route.metadata_key(kwargs)) or {}
    model = route.deployment_model(kwargs)
    deployment = None
    if isinstance(model, str):
        info = kwargs.get("model_info")
        base = kwargs.get("api_base")
        deployment = Deployment(
            model, model, dict(info) if isinstance(info, Mapping) else {}, base if isinstance(base, str) else ""
        )
    alias = md.get("model_group") if isinstance(md, Mapping) else None
    alias = alias if isinstance(alias, str) else None
    chain = routing.context_fallbacks(cg.router(), alias)
    return await cg._guard(kwargs, route, Attempt("deployment", identity_of(md), deployment, alias=alias, chain=chain))


async def filter_deployments(
    cg: Services, model: str, healthy: list[Any], messages: Any, kwargs: dict[str, Any]
) -> list[Any]:
    """Window-aware routing: of a group's healthy deployments, keep those that take the request
    whole if any do, else those that can after the allowed steps (all, if none can: the
    deployment hook then refuses with the numbers, which triggers context_window_fallbacks)."""
    found = routes.for_routing(kwargs, messages)
    if found is None or len(healthy) < 2:
        return healthy
    route, body = found
    entries = [d for d in healthy if isinstance(d, Mapping)]
    candidates = routing.from_entries(entries, model)
    if len({routing.limits_key(d) for d in candidates}) < 2:
        return healthy
    body["model"] = model
    md = body.get(route.metadata_key(body)) or {}
    identity = identity_of(md)
    heavy = cg.heavy_fits.of(body.get(route.dialect.messages_key))
    try:
        verdicts = await off_loop(heavy, _verdicts, cg, body, route, identity, model, candidates)
    except Exception as e:  # routing must never fail because of the guard
        telemetry.log.error("context-guard routing filter: %s", type(e).__name__)
        return healthy
    chosen = {id(v.deployment) for v in routing.best(verdicts)}
    kept = [entry for entry, v in zip(entries, verdicts) if id(v.deployment) in chosen]
    return kept or healthy


def identity_of(md: Any) -> Identity:
    return identity_from_metadata(md) if isinstance(md, Mapping) else Identity()


# -- fitting one pass -----------------------------------------------------------------------------


def policy_for(
    cg: Services, name: str, real: str, identity: Identity, data: Mapping[str, Any], route: Route
) -> tuple[Policy, list[str]]:
    md = data.get(route.metadata_key(data))
    client = md.get(records.CLIENT_POLICY_KEY) if isinstance(md, Mapping) else None
    return cg.engine.policies.resolve(
        (name, real),
        team=identity.team,
        key=identity.key,
        trusted=identity.trusted,
        client=client if isinstance(client, Mapping) else None,
    )


@dataclass
class _Pass:
    """One pass over a request: where it runs, the names and keys its report is stored under."""

    where: str
    name: str
    call: str | None
    md_key: str
    md: dict[str, Any]
    route: Route
    deployment: Deployment | None
    reject: bool
    chain: list[str] | None
    start: float = field(default_factory=time.perf_counter)
    layers: list[str] = field(default_factory=list)  # the policy layers that applied, once known
    seal: repeats.Seal | None = None  # what the fit depends on besides the body, once known


async def fit(cg: Services, data: dict[str, Any], route: Route, attempt: Attempt) -> dict[str, Any]:
    """One pass of the guard over a body: the fitted body with the report in its metadata, or the
    refusal LiteLLM acts on."""
    where, identity, deployment, chain = attempt.where, attempt.identity, attempt.deployment, attempt.chain
    md_key = route.metadata_key(data)
    md = data.get(md_key)
    md = dict(md) if isinstance(md, Mapping) else {}
    if attempt.fresh:
        md.pop(STATE_KEY, None)  # the proxy's first pass: a client cannot plant a report
    one = _Pass(
        where,
        attempt.alias or str(data.get("model")),
        records.call_id(data),
        md_key,
        md,
        route,
        deployment,
        attempt.reject,
        chain,
    )
    try:
        fitted = await _fitted(cg, data, one, identity)
    except _FallBack as fb:
        telemetry.fallback(one.name, fb.target, "before_cutting")
        message = (
            f"context-guard: {one.name} would have to cut this request; context_window_fallbacks "
            f"model {fb.target!r} takes it whole"
        )
        raise litellm.ContextWindowExceededError(
            message=message, model=one.name, llm_provider=provider(deployment)
        ) from None
    except _Repeat:
        return _repeated(data, one)
    except ContextWindowExceeded as e:
        return _too_long(e, data, one)
    except GuardError as e:  # bad body, unknown model, bad policy: a clear 400, never a silent pass
        telemetry.ERRORS.labels(type(e).__name__).inc()
        raise litellm.BadRequestError(message=str(e), model=one.name, llm_provider=provider(deployment)) from None
    except Exception as e:  # a guard bug: the policy decides between serving and refusing
        return _guard_failed(cg, e, data, one.name)
    own = fitted.report.to_dict()
    report = records.merge(md.get(STATE_KEY), own, one.layers)
    others = coexistence.detect(data, litellm.callbacks)
    if others:
        report["other_context_managers"] = others
    out = fitted.body
    records.store(out, md_key, md, report, one.call)
    repeats.seal(one.call, one.seal, out)
    elapsed = time.perf_counter() - one.start
    telemetry.observe(own, where, elapsed, first_pass=records.first_count(one.call, report["passes"] == 1))
    return out


def _repeated(data: dict[str, Any], one: _Pass) -> dict[str, Any]:
    """A pass over the body an earlier pass returned, nothing it reads changed: that answer stands."""
    own = repeats.own_report(one.md.get(STATE_KEY))
    report = records.merge(one.md.get(STATE_KEY), own, one.layers)
    records.store(data, one.md_key, one.md, report, one.call)
    elapsed = time.perf_counter() - one.start
    telemetry.observe(own, one.where, elapsed, first_pass=records.first_count(one.call, report["passes"] == 1))
    return data


async def _fitted(cg: Services, data: dict[str, Any], one: _Pass, identity: Identity) -> Fitted:
    """The fit of the body: its policy, a fallback that takes it whole (`_FallBack`), the
    deployment's calibration record and the conversation's cache temperature, then the planner."""
    engine, dialect, deployment, name = cg.engine, one.route.dialect, one.deployment, one.name
    real = deployment.model if deployment else name
    policy, one.layers = policy_for(cg, name, real, identity, data, one.route)
    key, later = engine.calibration_key(name, deployment), STATE_KEY in one.md  # (later: not a first pass)
    one.seal = repeats.Seal.of(engine, name, policy, deployment, key) if later or one.where == "proxy" else None
    if later and repeats.holds(one.call, one.seal, data):
        raise _Repeat
    messages = data.get(dialect.messages_key)
    # (a long body of a conversation this worker fitted a little before stays on the loop)
    conversation = engine.conversation_key(data, name, dialect)
    heavy = cg.heavy_fits.of(messages, conversation)
    if one.chain and policy.context_fallbacks == "before_cutting":
        attempt = Attempt(one.where, identity, deployment, alias=name, chain=one.chain)
        target = await off_loop(heavy, whole_elsewhere, cg, data, one.route, attempt, policy)
        if target is not None:  # a fallback takes it whole: let the router send it there uncut
            raise _FallBack(target)
    # the deployment's record (learned ratios; counting misses, which count in static mode too)
    await cg.calibrations.fresh(key)
    summarizer = cg.summarizer if policy.allows("summarize") else None
    # when the conversation was last sent, as every worker knows it (its cache temperature);
    # a later pass of the same request (the deployment hook after the proxy's) has the record
    # its first pass read and wrote in this process
    earlier = one.md.get(STATE_KEY)
    earlier_judged = isinstance(earlier, Mapping) and earlier.get("cache_temperature") in ("cold", "warm")
    known = earlier_judged or await cg.conversations.fresh(conversation)
    judged = Judged(temperature=None if known else temperature.UNKNOWN, conversation=conversation)
    request = FitRequest(data, name, dialect, policy, deployment, summarizer is not None, judged)

    def make(hurried: bool) -> Plan:  # hurried: the deterministic path (`HeavyFitSettings`)
        return engine.plan_for(replace(request, can_summarize=False, replay=False) if hurried else request)

    sent = len(messages) if isinstance(messages, list) else None  # (as the client sent it: before the fit)
    fitted = await drive(make, summarizer, identity.tenant, heavy=heavy)
    if sent is not None:
        cg.heavy_fits.fitted(conversation, sent, fitted.report.room - fitted.report.input_tokens_after)
    if known:
        await cg.conversations.record(conversation)
    return fitted


def _too_long(e: ContextWindowExceeded, data: dict[str, Any], one: _Pass) -> dict[str, Any]:
    """A body still over its room: its report stored and observed, then the refusal of this pass
    (or, where the router has a fallback or the pass does not reject, the body as it came)."""
    own = e.report.to_dict()
    report = records.merge(one.md.get(STATE_KEY), own, one.layers)
    records.store(data, one.md_key, one.md, report, one.call)
    final = one.reject and not one.chain
    count = final and records.first_count(one.call)
    telemetry.observe(own, one.where, time.perf_counter() - one.start, first_pass=count)
    if one.chain:
        telemetry.fallback(one.name, one.chain[0], "too_long")
    if not one.reject:
        return data
    if one.where == "proxy":
        raise one.route.proxy_refusal(e) from None
    raise one.route.sdk_refusal(e, model=one.name, llm_provider=provider(one.deployment)) from None


def _guard_failed(cg: Services, e: Exception, data: dict[str, Any], name: str) -> dict[str, Any]:
    """A guard bug: logged by type and place (its message could quote a request); the body goes as
    it came when the policy's `on_error` is open, else the request is refused."""
    telemetry.ERRORS.labels(type(e).__name__).inc()
    trace = ", ".join(f"{f.name}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)[-4:])
    telemetry.log.error("context-guard failed on model=%s: %s at %s", name, type(e).__name__, trace)
    if fail_open(cg, name):
        return data
    # refused: with the exception's type only (its message could quote the request)
    raise GuardFailed(f"context-guard failed ({type(e).__name__}) and on_error is closed: request refused") from None


def fail_open(cg: Services, model: str) -> bool:
    try:
        return cg.engine.policies.for_model(model).on_error == "open"
    except Exception:
        return True


# -- routing: groups of mixed windows and context fallbacks ----------------------------------------


def _verdicts(
    cg: Services, body: dict[str, Any], route: Route, identity: Identity, group: str, candidates: list[Deployment]
) -> list[routing.Verdict]:
    policies = [policy_for(cg, group, d.model, identity, body, route)[0] for d in candidates]
    return routing.best_tiers(cg.engine, body, candidates, policies, route.dialect)


def whole_elsewhere(cg: Services, data: dict[str, Any], route: Route, attempt: Attempt, policy: Policy) -> str | None:
    """The first fallback group (of `attempt.chain`) that takes the body whole, if the attempt's
    deployment (or its model group, `attempt.alias`) cannot."""
    identity, name, chain = attempt.identity, str(attempt.alias), attempt.chain or []
    here = attempt.deployment or Deployment(name, name, {})
    if routing.whole(cg.engine, data, here, policy, route.dialect):
        return None
    router = cg.router()
    for group in chain:
        for d in routing.deployments(router, group):
            p, _ = policy_for(cg, group, d.model, identity, data, route)
            if routing.whole(cg.engine, data, d, p, route.dialect):
                return group
    return None


async def check_candidates(
    cg: Services, data: dict[str, Any], route: Route, attempt: Attempt, group: list[Deployment]
) -> dict[str, Any]:
    """Before routing, for a group of mixed windows or with context fallbacks: refuse what no
    deployment of the group (of model group `attempt.alias`) or its fallbacks (`attempt.chain`) can
    take; leave the rest to each attempt."""
    identity, alias, chain = attempt.identity, str(attempt.alias), attempt.chain or []
    md_key = route.metadata_key(data)
    md = data.get(md_key)
    if isinstance(md, Mapping) and STATE_KEY in md:
        data[md_key] = {k: v for k, v in md.items() if k != STATE_KEY}  # a client cannot plant a report
    router = cg.router()
    candidates = [(alias, d) for d in group] + [(g, d) for g in chain for d in routing.deployments(router, g)]
    if not candidates:
        return data
    start = time.perf_counter()
    heavy = cg.heavy_fits.of(data.get(route.dialect.messages_key))

    def verdicts() -> list[tuple[str, routing.Verdict]]:
        each = [(name, Deployment(name, d.model, d.model_info)) for name, d in candidates]
        policies = [policy_for(cg, name, d.model, identity, data, route)[0] for name, d in each]
        return routing.first_taker(cg.engine, data, each, policies, route.dialect)

    try:
        found = await off_loop(heavy, verdicts)
    except GuardError as e:
        telemetry.ERRORS.labels(type(e).__name__).inc()
        raise litellm.BadRequestError(message=str(e), model=alias, llm_provider="openai") from None
    if any(v.tier != routing.NONE for _, v in found):
        return data
    errors = [(name, v.error) for name, v in found if v.error is not None]
    if not errors:
        return data  # none could even be resolved: the deployment hook says why
    first = errors[0][1]
    report = first.report.to_dict()
    report["models_tried"] = [name for name, _ in errors]
    md = dict(data.get(md_key) or {})
    call = records.call_id(data)
    report["policy_layers"], report["passes"] = [], 1
    records.store(data, md_key, md, report, call)
    telemetry.observe(
        first.report.to_dict(), "proxy", time.perf_counter() - start, first_pass=records.first_count(call)
    )
    also = "; ".join(f"{name}: needs {e.shortfall.requested} > {e.shortfall.limit}" for name, e in errors[1:])
    suffix = f" No model this request may be routed to can take it (also tried {also})." if also else ""
    raise route.proxy_refusal(first, suffix, {"models_tried": report["models_tried"]}) from None


# -- LiteLLM's proxy, as the hooks find it -----------------------------------------------------------


def provider(deployment: Deployment | None) -> str:
    if deployment and "/" in deployment.model:
        return deployment.model.split("/", 1)[0]
    return "openai"


def proxy_router() -> Any:
    module = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(module, "llm_router", None) if module else None


def proxy_config_path() -> str | None:
    module = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(module, "user_config_file_path", None) if module else None


def router_deployment(alias: Any, router: Any = None) -> Deployment | None:
    """The alias's deployment(s) as the router knows them (smallest limits across them)."""
    router = router or proxy_router()
    if router is None or not isinstance(alias, str):
        return None
    try:
        entries = router_api.model_list(router, alias)
    except Exception:
        return None
    return parse_model_list([e for e in entries if isinstance(e, Mapping)]).get(alias)
