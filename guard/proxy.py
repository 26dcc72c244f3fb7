"""The instance the LiteLLM proxy loads: `litellm_settings: {callbacks: guard.proxy.context_guard}`.

Its policy is the `context_guard:` section of the proxy's own config file, read at start-up; its
model limits come from the proxy's router (model_list `model_info`) and LiteLLM's model map. If
the proxy has no `/metrics` endpoint yet (LiteLLM mounts one only with its prometheus callback),
the guard mounts the standard Prometheus exposition there. The token-counting endpoints agents
call (`/v1/messages/count_tokens`, `/v1/responses/input_tokens`) answer with the guard's own
count (calibrated, the caller's policy applied), so an agent's accounting and the guard's agree;
`/model/info` and `/v1/models` entries carry the limits the guard enforces for the caller.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from guard.core.errors import GuardError
from guard.core.identity import identity_from_auth
from guard.core.policy import Policy
from guard.core.tokens import set_counting_threads
from guard.shell.callback import ContextGuard, _proxy_config_path
from guard.state import telemetry

# The proxy reads its config file before it loads callbacks, so the policy is validated here, at
# start-up: an invalid `context_guard:` section stops the proxy with the field named.
context_guard = ContextGuard(config=_proxy_config_path())


def _warm() -> None:
    """The tokenizers of the model_list loaded now, at start-up (each worker imports this
    module), not on each worker's first request (~0.3-0.5 s an encoding), with the twins of
    `context_guard.worker.counting_threads: 2`. A failure is logged and left to the request path."""
    started = time.perf_counter()
    try:
        set_counting_threads(context_guard.worker.counting_threads)  # (before `warm` builds a twin for it)
        names = context_guard.engine.warm()
    except Exception as e:  # (start-up goes on; the first request loads what it needs)
        telemetry.log.warning(
            "context-guard start-up: tokenizers not loaded (%s); the first request loads them", type(e).__name__
        )
        return
    telemetry.log.info(
        "context-guard start-up: tokenizers of %d models loaded in %.2f s", len(names), time.perf_counter() - started
    )


_warm()


def _freeze() -> None:
    """The objects alive now (LiteLLM's and the proxy's modules, the guard, its tokenizers) moved to
    Python's permanent GC generation, unless `context_guard.worker.freeze_gc_at_start` is false: a
    full collection then walks what requests made since, not the whole proxy (see `WorkerSettings`)."""
    try:
        if not context_guard.worker.freeze_gc_at_start:
            return
    except Exception as e:  # (a config that cannot be read says so on the request path)
        telemetry.log.warning("context-guard start-up: gc not frozen (%s)", type(e).__name__)
        return
    gc.freeze()
    telemetry.log.info(
        "context-guard start-up: %d objects frozen out of the garbage collector's walks", gc.get_freeze_count()
    )


_freeze()


def _proxy_module() -> Any:
    """LiteLLM's proxy server module when it is loaded (None in SDK code)."""
    module = sys.modules.get("litellm.proxy.proxy_server")
    return module if module is not None and getattr(module, "app", None) is not None else None


def _mount_metrics() -> None:
    module = _proxy_module()
    if module is None or any(getattr(r, "path", None) == "/metrics" for r in module.app.routes):
        return
    from prometheus_client import CollectorRegistry, make_asgi_app, multiprocess

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # `litellm --num_workers N`: every worker writes its samples to that directory (LiteLLM's own
        # multiprocess mode); whichever worker answers /metrics sums them all
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        module.app.mount("/metrics", make_asgi_app(registry))
        return
    module.app.mount("/metrics", make_asgi_app())


_mount_metrics()


def _caller_policy(name: str, auth: Any) -> Policy:
    """The policy of a request to `name` from the caller behind LiteLLM's `auth` (no client hints)."""
    engine = context_guard.engine
    identity = identity_from_auth(auth)
    policy, _ = engine.policies.resolve(
        (name, engine.underlying(name)), team=identity.team, key=identity.key, trusted=identity.trusted
    )
    return policy


def _route(module: Any, path: str, endpoint: Callable[..., Awaitable[Any]], method: str) -> None:
    """`endpoint` at `path`, behind LiteLLM's key auth, ahead of LiteLLM's own routes."""
    from fastapi import Depends
    from fastapi.routing import APIRoute
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    module.app.router.routes.insert(
        0, APIRoute(path, endpoint, methods=[method], dependencies=[Depends(user_api_key_auth)])
    )


# path -> (dialect, how the answer looks); the paths LiteLLM serves them at
_ANTHROPIC = ("anthropic", lambda n: {"input_tokens": n})
_RESPONSES = ("responses", lambda n: {"object": "response.input_tokens", "input_tokens": n})
COUNTING = {
    "/v1/messages/count_tokens": _ANTHROPIC,
    "/v1/responses/input_tokens": _RESPONSES,
    "/responses/input_tokens": _RESPONSES,
    "/openai/v1/responses/input_tokens": _RESPONSES,
}


def _bad_count(dialect: str, message: str) -> Any:
    """A 400 in the shape of the counting endpoint's provider."""
    from fastapi.responses import JSONResponse

    error = {"type": "invalid_request_error", "message": message}
    payload = (
        {"type": "error", "error": error}
        if dialect == "anthropic"
        else {"error": {**error, "param": None, "code": None}}
    )
    return JSONResponse(payload, status_code=400)


def _mount_counting() -> None:
    """The guard's count at the token-counting endpoints, ahead of LiteLLM's own routes."""
    module = _proxy_module()
    if module is None:
        return
    from fastapi import Depends, Request
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    def endpoint(dialect: str, answer: Callable[[int], dict[str, Any]]) -> Callable[..., Awaitable[Any]]:
        async def count(request: Request, auth: Any = Depends(user_api_key_auth)) -> Any:
            try:
                body = await request.json()
            except ValueError:
                return _bad_count(dialect, "the request body is not valid JSON")
            name = body.get("model") if isinstance(body, dict) else None
            if not isinstance(name, str) or not name:
                return _bad_count(dialect, "the request names no model")
            try:
                return answer(context_guard.engine.count(body, dialect=dialect, policy=_caller_policy(name, auth)))
            except GuardError as e:
                return _bad_count(dialect, str(e))

        # (this module's annotations are strings; FastAPI must see the classes to inject the request)
        count.__annotations__ = {"request": Request, "auth": Any, "return": Any}
        return count

    for path, (dialect, answer) in COUNTING.items():
        _route(module, path, endpoint(dialect, answer), "POST")


_mount_counting()


def _limits_for(name: str, auth: Any) -> dict[str, float] | None:
    """What the guard enforces for `name` and the caller behind `auth` (None: no limits known)."""
    from guard.core.announce import announce

    try:
        engine = context_guard.engine
        policy = _caller_policy(name, auth)
        # (the factor its counts are calibrated with now: the agent's figures are the provider's tokens)
        factor = engine.count_factor(name, policy, key=engine.calibration_key(name))
        a = announce(name, engine.limits_for(name, policy), policy, factor.value)
    except GuardError:
        return None
    return {
        "context_window": a.window,
        "max_output_tokens": a.max_output,
        "safety_margin_tokens": a.margin,
        "max_input_tokens": a.input_limit,
        "agent_context_window": a.agent_window,
        "auto_compact_tokens": a.auto_compact,
        "count_factor": a.factor,
    }


def _with_limits(entry: Any, auth: Any, name_key: str) -> None:
    """One listed model, given the limits the guard enforces for it and the caller (in place)."""
    if not isinstance(entry, dict) or not isinstance(entry.get(name_key), str):
        return
    limits = _limits_for(entry[name_key], auth)
    if limits is None:
        return
    if name_key == "model_name":  # /model/info: next to LiteLLM's own model_info fields
        raw = entry.get("model_info")
        info = raw if isinstance(raw, dict) else {}
        entry["model_info"] = {**info, "context_guard": limits}
    else:  # /v1/models: a field of the model object (clients ignore fields they do not know)
        entry["context_guard"] = limits


def _mount_model_lists() -> None:
    """`/model/info` entries carry `model_info.context_guard` and `/v1/models` entries a
    `context_guard` field: the limits the guard enforces for the caller's key and team (see
    guard.core.announce), next to LiteLLM's own. LiteLLM's handlers are wrapped; an answer of a shape
    the guard does not know goes out as LiteLLM made it."""
    import functools
    import json

    module = _proxy_module()
    if module is None:
        return
    from fastapi.responses import JSONResponse

    def wrapped(original: Callable[..., Awaitable[Any]], name_key: str) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(original)
        async def with_limits(*args: Any, **kwargs: Any) -> Any:
            result = await original(*args, **kwargs)
            body = result
            if hasattr(result, "body") and getattr(result, "media_type", None) == "application/json":
                body = json.loads(bytes(result.body))
            if not isinstance(body, dict) or not isinstance(body.get("data"), list):
                return result
            for entry in body["data"]:
                _with_limits(entry, kwargs.get("user_api_key_dict"), name_key)
            return JSONResponse(body, status_code=getattr(result, "status_code", 200))

        return with_limits

    for handler, name_key, paths in (
        ("model_info_v1", "model_name", ("/model/info", "/v1/model/info")),
        ("model_list", "id", ("/v1/models", "/models")),
    ):
        original = getattr(module, handler, None)
        if original is None:
            continue
        endpoint = wrapped(original, name_key)
        for path in paths:
            _route(module, path, endpoint, "GET")


_mount_model_lists()
