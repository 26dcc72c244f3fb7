"""Sync calls, where LiteLLM runs no hook that can rewrite a chat request: `guard.completion`,
`ContextGuard.wrap`, and `guard.instrument()`, which wraps LiteLLM's sync `completion` in the
style of the OpenTelemetry instrumentors (so a sync `Router.completion` is fitted per attempt).
`guard.responses` does the same for `litellm.responses` (LiteLLM 1.106 also runs the deployment
hook for it, so the callback alone fits it there)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

import litellm

from guard.core.config import Deployment
from guard.core.identity import identity_from_metadata
from guard.shell import records, routes, routing
from guard.shell.fitting import router_deployment
from guard.shell.routes import Route
from guard.shell.services import Attempt
from guard.shell.summarizer import internal_call

if TYPE_CHECKING:
    from guard.shell.services import Services


def fit_kwargs(
    cg: Services, kwargs: Mapping[str, Any], *, router: Any = None, route: Route = routes.CHAT
) -> dict[str, Any]:
    """The kwargs of a sync call, fitted as the deployment hook fits an async one (raises
    `guard.ContextWindowExceededError`, which is LiteLLM's context-window error). Called by a
    Router (through `instrument` or `wrap(router.completion, router=...)`), the kwargs name the
    deployment (`model`, `model_info`) and its group (`metadata.model_group`)."""
    model = kwargs.get("model")
    md_key = route.metadata_key(kwargs)
    md: Mapping[str, Any] = kwargs[md_key] if isinstance(kwargs.get(md_key), Mapping) else {}
    alias = md.get("model_group") if isinstance(md.get("model_group"), str) else None
    info = kwargs.get("model_info")
    router = router or cg.own_router()
    if alias is not None and isinstance(model, str):
        deployment: Deployment | None = Deployment(alias, model, dict(info) if isinstance(info, Mapping) else {})
    else:
        deployment = router_deployment(model, router) if router is not None else None
    chain = routing.context_fallbacks(router or cg.router(), alias)
    attempt = Attempt("sdk_sync", identity_from_metadata(md), deployment, alias=alias, chain=chain)
    coro = cg._guard(dict(kwargs), route, attempt)
    return cast("dict[str, Any]", run_sync(coro))


def wrap(cg: Services, fn: Callable[..., Any], *, router: Any = None, route: Route = routes.CHAT) -> Callable[..., Any]:
    """`fn` with its requests fitted (see `ContextGuard.wrap`)."""
    if router is not None and route is routes.CHAT:
        if cg.own_router() is None:
            cg.use_router(router)

        @functools.wraps(fn)
        def routed(*args: Any, **kwargs: Any) -> Any:
            _acquire()  # LiteLLM's completion is wrapped only while such calls run
            token = _SCOPE.set(cg)
            try:
                return fn(*args, **kwargs)
            finally:
                _SCOPE.reset(token)
                _release()

        return routed

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return _fitted_call(cg, fn, args, kwargs, router=router, route=route)

    return guarded


def _fitted_call(
    cg: Services,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    router: Any = None,
    route: Route = routes.CHAT,
) -> Any:
    """`fn(*args, **kwargs)` with the request fitted first and the report on its response."""
    if args:
        kwargs = {**dict(zip(("model", route.dialect.messages_key), args)), **kwargs}
    fitted = fit_kwargs(cg, kwargs, router=router, route=route)
    return records.attach(fn(**fitted), records.report_in(fitted))


def run_sync(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # called from inside a running loop (sync code in async context): run in a helper thread
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


# -- instrumentation of LiteLLM's sync entry points ---------------------------------------------

_ORIGINAL: dict[str, Any] = {}
_INSTRUMENTED: list[Services] = []  # the guard that fits every sync call (instrument())
_SCOPE: ContextVar[Services | None] = ContextVar("context_guard_sync_scope", default=None)
_PATCH_LOCK = threading.Lock()
_USERS = [0]  # sync Router calls through `wrap(..., router=)` running now
_litellm_completion = litellm.completion  # LiteLLM's own, whatever is patched later


def _completion_entry(*args: Any, **kwargs: Any) -> Any:
    """`litellm.completion` while instrumented: fitted first, as `acompletion` is by the hook."""
    original = _ORIGINAL.get("completion") or _litellm_completion
    guard = _SCOPE.get() or (_INSTRUMENTED[0] if _INSTRUMENTED else None)
    if guard is None or internal_call.get(False):
        return original(*args, **kwargs)
    return _fitted_call(guard, original, args, kwargs)


def _install() -> None:
    if "completion" not in _ORIGINAL:
        _ORIGINAL["completion"] = litellm.completion
        litellm.completion = _completion_entry


def _restore() -> None:
    original = _ORIGINAL.pop("completion", None)
    if original is not None:
        litellm.completion = original


def _acquire() -> None:
    with _PATCH_LOCK:
        _USERS[0] += 1
        _install()


def _release() -> None:
    with _PATCH_LOCK:
        _USERS[0] -= 1
        if _USERS[0] == 0 and not _INSTRUMENTED:
            _restore()


def instrument(guard: Services, *, router: Any = None) -> Services:
    """Fit every sync `litellm.completion` call with `guard`, including those a sync
    `Router.completion` makes per attempt (see `guard.instrument`, which picks the guard)."""
    if router is not None:
        guard.use_router(router)
    with _PATCH_LOCK:
        _INSTRUMENTED[:] = [guard]
        _install()
    return guard


def uninstrument() -> None:
    """Undo `instrument()`: LiteLLM's own `completion` again."""
    with _PATCH_LOCK:
        _INSTRUMENTED.clear()
        if _USERS[0] == 0:
            _restore()


def is_instrumented() -> bool:
    return bool(_INSTRUMENTED) and "completion" in _ORIGINAL


def original_completion() -> Callable[..., Any]:
    """LiteLLM's own `completion`, whether or not it is instrumented now."""
    return cast("Callable[..., Any]", _ORIGINAL.get("completion") or litellm.completion)
