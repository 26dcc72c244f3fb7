"""The LiteLLM adapter: one callback (`ContextGuard`) for the proxy and the SDK.

Where it runs (LiteLLM 1.106.2, verified by tests/e2e):
- proxy `/chat/completions`, `/v1/messages` and `/v1/responses`: `async_pre_call_hook` once before
  routing (it fits a single-deployment group, or, for a group of mixed windows or with
  context_window_fallbacks, only refuses what no candidate can take), `async_filter_deployments`
  while routing (keeps the deployments that can take the request, whole if any can), then
  `async_pre_call_deployment_hook` per attempt and fallback, fitted to the deployment that serves
  it (and again in the provider's shape where LiteLLM bridges one route to another);
- SDK `litellm.acompletion` / `aresponses` and the Router's: the filter and the deployment hook;
  sync `litellm.responses`: the deployment hook, which LiteLLM runs for it;
- SDK sync `litellm.completion` / `Router.completion`: LiteLLM has no hook that can rewrite the
  request there, so `guard.completion`, `ContextGuard.wrap` and `guard.instrument()` fit it
  (`guard.shell.sync_calls`); a call that reaches a provider unfitted is logged and counted.

The class only wires LiteLLM's hooks to the shell's modules: `guard.shell.routes` (one adapter per
route: call types, dialect, metadata key, refusal shape), `guard.shell.fitting` (the work of a pass),
`guard.shell.observing` (what the provider's answer tells), `guard.shell.records` (the report in request
metadata) and `guard.shell.sync_calls`. The hooks are defined on the class itself: the proxy skips
inherited ones.

Running twice is harmless: the engine is idempotent, and a later pass over the body an earlier pass
returned, nothing it reads changed, takes that answer without fitting again (`guard.shell.repeats`);
reports are kept per `litellm_call_id`, so headers and metrics describe the attempt that served the
reply, counted once. Refusals are raised as `ContextWindowExceededError` (LiteLLM's, and the
guard's), which the proxy turns into a 400 and the Router into `context_window_fallbacks`. Guard
state lives in request metadata (`metadata` on chat, `litellm_metadata` on `/v1/messages` and
`/v1/responses`), never in top-level keys that would reach the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger

from guard.core.config import Deployment
from guard.core.identity import STATE_KEY, Identity, identity_from_auth, identity_from_metadata
from guard.core.modelmap import litellm_resolver as litellm_model_info  # (the name this module exported before)
from guard.core.policy import Policy, PolicySet
from guard.shell import fitting, observing, records, routes, sync_calls, unguarded
from guard.shell.fitting import GuardFailed
from guard.shell.fitting import proxy_config_path as _proxy_config_path
from guard.shell.records import CLIENT_POLICY_KEY, report_of
from guard.shell.routes import ContextWindowExceededError, Route
from guard.shell.summarizer import internal_call
from guard.shell.sync_calls import _litellm_completion, is_instrumented, uninstrument
from guard.shell.wiring import GuardServices
from guard.state import telemetry


class ContextGuard(GuardServices, CustomLogger):
    """Fit every request (chat, /v1/messages, Responses) to its model before LiteLLM sends it:
    `ContextGuard()` (defaults), `ContextGuard(config="proxy_config.yaml")` (its `context_guard:`
    section and `model_list` model_info), `ContextGuard(policies={"default_max_tokens": 2048})`.
    What it is built from and owns (engine, summarizer, cache, stores, router) is `GuardServices`'s
    (guard.shell.wiring); this class is the table of LiteLLM's hooks."""

    # -- LiteLLM hooks: each picks the route from the call type and hands over ---------------------
    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> Any:
        route = routes.for_call(call_type)
        if route is None:
            unguarded.seen(self, data, call_type, "pre-call hook")  # counted; refused under on_unguarded: refuse
            return data
        if not route.carries_turns(data) or not isinstance(data, dict):
            return data
        return await fitting.before_routing(self, data, route, identity_from_auth(user_api_key_dict))

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list[Any],
        messages: list[Any] | None,
        request_kwargs: dict[str, Any] | None = None,
        parent_otel_span: Any = None,
    ) -> list[Any]:
        if internal_call.get(False):
            return healthy_deployments
        kwargs = request_kwargs if isinstance(request_kwargs, dict) else {}
        return await fitting.filter_deployments(self, model, healthy_deployments, messages, kwargs)

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> Any:
        route = routes.for_call(call_type)
        if route is None:
            unguarded.seen(self, kwargs, call_type, "deployment hook")
            return kwargs
        if not route.carries_turns(kwargs) or internal_call.get(False):
            return kwargs
        return await fitting.for_deployment(self, kwargs, route)

    async def async_post_call_response_headers_hook(
        self,
        data: dict[str, Any],
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, object] | None = None,
    ) -> dict[str, str] | None:
        report = records.latest(data)
        return telemetry.headers(report) if report is not None else None

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        # SDK callers: the report rides on the response (`guard.report_of(response)`)
        return records.attach(response, records.report_in(request_data) if isinstance(request_data, Mapping) else None)

    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        unguarded.reached(kwargs)  # no silent bypass (LiteLLM swallows this hook's exceptions: it cannot stop the call)

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await observing.succeeded(self, kwargs, response_obj)

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await observing.failed_async(self, kwargs)

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        observing.failed(self, kwargs)

    # -- sync calls -------------------------------------------------------------------------
    def fit_kwargs(
        self, kwargs: Mapping[str, Any], *, router: Any = None, route: Route = routes.CHAT
    ) -> dict[str, Any]:
        """A sync call's kwargs, fitted like an async call's (see `guard.shell.sync_calls.fit_kwargs`)."""
        return sync_calls.fit_kwargs(self, kwargs, router=router, route=route)

    def wrap(self, fn: Callable[..., Any], *, router: Any = None, route: Route = routes.CHAT) -> Callable[..., Any]:
        """`fn` with its requests fitted: `wrap(litellm.completion)`, `wrap(litellm.responses,
        route=guard.shell.routes.RESPONSES)`; `wrap(router.completion, router=router)` fits each attempt to
        the deployment the Router picks, so context-window fallbacks work as in the async Router."""
        return sync_calls.wrap(self, fn, router=router, route=route)


_default_guard: list[ContextGuard] = []


def guard_instance() -> ContextGuard:
    """The ContextGuard registered in `litellm.callbacks`, else a default one."""
    for cb in litellm.callbacks:
        if isinstance(cb, ContextGuard):
            return cb
    if not _default_guard:
        _default_guard.append(ContextGuard(policies=PolicySet()))
    return _default_guard[0]


def instrument(guard: ContextGuard | None = None, *, router: Any = None) -> ContextGuard:
    """Fit every sync `litellm.completion` call, including those a sync `Router.completion` makes
    per attempt (fallbacks included), like their async forms. Idempotent; `uninstrument()` puts
    LiteLLM's own function back. Returns the guard in use (the registered one by default)."""
    g = guard or guard_instance()
    sync_calls.instrument(g, router=router)
    return g


def completion(*args: Any, **kwargs: Any) -> Any:
    """`litellm.completion` with the request fitted first, by the ContextGuard registered in
    `litellm.callbacks` (or a default one). Same signature and return value."""
    return guard_instance().wrap(sync_calls.original_completion())(*args, **kwargs)


def responses(*args: Any, **kwargs: Any) -> Any:
    """`litellm.responses` (the OpenAI Responses API, sync) with the request fitted first, like
    `completion`. LiteLLM 1.106 also runs the callback's deployment hook for sync Responses calls
    (a second, unchanged pass); this wrapper fits them whatever the LiteLLM version."""
    return guard_instance().wrap(litellm.responses, route=routes.RESPONSES)(*args, **kwargs)


__all__ = [
    "CLIENT_POLICY_KEY",
    "STATE_KEY",
    "ContextGuard",
    "ContextWindowExceededError",
    "Deployment",
    "GuardFailed",
    "Identity",
    "Policy",
    "_litellm_completion",
    "_proxy_config_path",
    "completion",
    "identity_from_auth",
    "identity_from_metadata",
    "instrument",
    "is_instrumented",
    "litellm_model_info",
    "report_of",
    "responses",
    "uninstrument",
]
