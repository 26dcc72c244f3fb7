"""The LiteLLM adapter: one callback for the proxy and the SDK, plus a wrapper for sync calls.

Where it runs (LiteLLM 1.106.2, verified by tests/e2e):
- proxy `/chat/completions` and `/v1/messages`: `async_pre_call_hook` (once, before routing), then
  `async_pre_call_deployment_hook` (after routing, per attempt and fallback);
- SDK `litellm.acompletion` and `Router.acompletion`: `async_pre_call_deployment_hook`;
- SDK sync `litellm.completion` / `Router.completion`: LiteLLM has no hook that can rewrite the
  request there, so `ContextGuard.wrap(fn)` (and `guard.completion`) fit the kwargs first.

Running twice is harmless: the engine is idempotent and counts are cached, and the report of the
first pass is kept (later passes only add what they changed). Rejections are raised as LiteLLM's
`ContextWindowExceededError`, which the proxy turns into a 400 and the Router into
`context_window_fallbacks`. Guard state lives in request metadata (`metadata` on chat,
`litellm_metadata` on `/v1/messages`), never in top-level keys that would reach the provider.
"""

from __future__ import annotations

import asyncio
import hashlib
import functools
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import litellm
from litellm.integrations.custom_logger import CustomLogger

from guard import coexistence, telemetry
from guard.cache import SummaryCache
from guard.config import CacheSettings, Deployment, GuardConfig, SummarizerSettings, load_config, parse_model_list
from guard.dialects import ANTHROPIC, OPENAI, Dialect
from guard.engine import Engine
from guard.jsontext import bounded_put
from guard.errors import ContextWindowExceeded, GuardError
from guard.planner import CachedSummaries, Fitted, Plan
from guard.policy import Policy, PolicySet, load_policy_set
from guard.summarizer import Call, Summarizer, internal_call

STATE_KEY = "context_guard"  # our report, in request metadata
CLIENT_POLICY_KEY = "context_guard_policy"  # a client's hints: may only tighten
_THREAD_THRESHOLD = 64  # messages; bigger bodies are fitted off the event loop
_CHAT_CALLS = {"completion", "acompletion"}
_ANTHROPIC_CALLS = {"anthropic_messages"}


@dataclass(frozen=True)
class Identity:
    """Who sent the request, from LiteLLM's authenticated key (never from client metadata)."""

    team: tuple[str | None, ...] = ()
    key: tuple[str | None, ...] = ()
    trusted: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    tenant: str = "anonymous"  # whose summaries a request may reuse: the team, else the key


def _tenant(team_id: Any, key_hash: Any) -> str:
    if isinstance(team_id, str) and team_id:
        return "team:" + team_id
    if isinstance(key_hash, str) and key_hash:
        return "key:" + hashlib.sha256(key_hash.encode()).hexdigest()[:32]
    return "anonymous"


def _call_name(call_type: Any) -> str:
    return str(getattr(call_type, "value", call_type))


def _dialect(call_type: Any) -> Dialect | None:
    name = _call_name(call_type)
    if name in _CHAT_CALLS:
        return OPENAI
    if name in _ANTHROPIC_CALLS:
        return ANTHROPIC
    return None


def _guard_overrides(*metadata: Any) -> tuple[Mapping[str, Any], ...]:
    out = []
    for md in metadata:
        if isinstance(md, Mapping) and isinstance(md.get(STATE_KEY), Mapping):
            out.append(md[STATE_KEY])
    return tuple(out)


def identity_from_auth(auth: Any) -> Identity:
    """Identity from the proxy's `UserAPIKeyAuth` (team id/alias, key alias, team and key metadata)."""
    if auth is None:
        return Identity()
    return Identity(
        team=(getattr(auth, "team_id", None), getattr(auth, "team_alias", None)),
        key=(getattr(auth, "key_alias", None), getattr(auth, "key_name", None)),
        trusted=_guard_overrides(getattr(auth, "team_metadata", None), getattr(auth, "metadata", None)),
        tenant=_tenant(getattr(auth, "team_id", None), getattr(auth, "api_key", None) or getattr(auth, "token", None)),
    )


def identity_from_metadata(md: Mapping[str, Any]) -> Identity:
    """Identity from the `user_api_key_*` fields the proxy writes into request metadata (a client
    that sends them is overwritten by the proxy; in SDK mode the caller is the application)."""
    return Identity(
        team=(md.get("user_api_key_team_id"), md.get("user_api_key_team_alias")),
        key=(md.get("user_api_key_alias"),),
        trusted=_guard_overrides(md.get("user_api_key_team_metadata"), md.get("user_api_key_metadata")),
        tenant=_tenant(md.get("user_api_key_team_id"), md.get("user_api_key_hash")),
    )


class GuardFailed(RuntimeError):
    """A bug in the guard refused the request (`on_error: closed`); a server error, never text."""


class ContextGuard(CustomLogger):
    """Fit every chat request to its model before LiteLLM sends it.

    ContextGuard()                         # defaults
    ContextGuard(config="proxy_config.yaml")   # context_guard: section + model_list model_info
    ContextGuard(policies={"default_max_tokens": 2048, "teams": {...}})
    """

    def __init__(
        self,
        policies: PolicySet | Mapping[str, Any] | None = None,
        *,
        config: str | None = None,
        engine: Engine | None = None,
        summarizer: SummarizerSettings | Mapping[str, Any] | None = None,
        cache: SummaryCache | CacheSettings | Mapping[str, Any] | None = None,
        summarize_call: Call | None = None,
    ) -> None:
        super().__init__()
        self._config_path = config
        self._engine = engine
        self._policies = policies if isinstance(policies, PolicySet) or policies is None else load_policy_set(policies)
        self._summarizer_settings = (
            SummarizerSettings.model_validate(summarizer) if isinstance(summarizer, Mapping) else summarizer
        )
        self._cache = cache if isinstance(cache, SummaryCache) else None
        self._cache_settings = CacheSettings.model_validate(cache) if isinstance(cache, Mapping) else (
            cache if isinstance(cache, CacheSettings) else None
        )
        self._summarize_call = summarize_call
        self._summarizer: Summarizer | None = None
        self._misses: dict[str, None] = {}  # call ids already counted as counting misses
        if engine is None and (config is not None or policies is not None):
            self._build()
        elif engine is not None:
            self._build_summarizer(None)

    # -- set-up -----------------------------------------------------------------------------
    def _build(self) -> None:
        if self._config_path is not None:
            cfg = load_config(self._config_path)
        else:
            cfg = GuardConfig(self._policies or PolicySet(), {})
        self._engine = Engine(cfg.policies, deployments=cfg.deployments, model_map=litellm.model_cost)
        self._build_summarizer(cfg)

    def _build_summarizer(self, cfg: GuardConfig | None) -> None:
        settings = self._summarizer_settings or (cfg.summarizer if cfg else None)
        cache_settings = self._cache_settings or (cfg.cache if cfg else None)
        if self._cache is None:
            self._cache = SummaryCache(cache_settings)
        if settings is not None and self._engine is not None:
            self._summarizer = Summarizer(settings, self._engine, self._cache, call=self._summarize_call)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._config_path = self._config_path or _proxy_config_path()
            self._build()
        assert self._engine is not None
        return self._engine

    @property
    def summarizer(self) -> Summarizer | None:
        self.engine  # noqa: B018 - built with the engine
        return self._summarizer

    # -- LiteLLM hooks (defined on this class itself: the proxy skips inherited ones) ---------
    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> Any:
        dialect = _dialect(call_type)
        if dialect is None or not isinstance(data, dict) or "messages" not in data:
            return data
        alias = data.get("model")
        return await self._guard(
            data,
            dialect,
            route="proxy",
            identity=identity_from_auth(user_api_key_dict),
            deployment=_router_deployment(alias),
            reject=not _has_context_fallbacks(alias),
            fresh=True,
        )

    async def async_pre_call_deployment_hook(self, kwargs: dict, call_type: Any) -> Any:
        dialect = _dialect(call_type)
        if dialect is None or "messages" not in kwargs or internal_call.get(False):
            return kwargs
        md = kwargs.get(_md_key(kwargs, dialect)) or {}
        model = kwargs.get("model")
        deployment = None
        if isinstance(model, str):
            info = kwargs.get("model_info")
            deployment = Deployment(model, model, dict(info) if isinstance(info, Mapping) else {})
        alias = md.get("model_group") if isinstance(md, Mapping) else None
        return await self._guard(
            kwargs,
            dialect,
            route="deployment",
            identity=identity_from_metadata(md) if isinstance(md, Mapping) else Identity(),
            deployment=deployment,
            reject=True,
            alias=alias if isinstance(alias, str) else None,
        )

    async def async_post_call_response_headers_hook(
        self,
        data: dict,
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, object] | None = None,
    ) -> dict[str, str] | None:
        for key in ("metadata", "litellm_metadata"):
            md = data.get(key) if isinstance(data, dict) else None
            if isinstance(md, Mapping) and isinstance(md.get(STATE_KEY), Mapping) and "outcome" in md[STATE_KEY]:
                return telemetry.headers(md[STATE_KEY])
        return None

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._failed(kwargs)

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._failed(kwargs)

    def _failed(self, kwargs: Any) -> None:
        """A provider call failed. A context-window error on a request the guard counted as
        fitting is a counting miss: counted once per call, logged with numbers only."""
        try:
            if not isinstance(kwargs, Mapping) or not isinstance(kwargs.get("exception"), litellm.ContextWindowExceededError):
                return
            report = _report_in(kwargs)
            if report is None or report.get("outcome") not in ("fitted", "unchanged"):
                return  # not checked by the guard, or let through on purpose (context_window_fallbacks)
            call = str(kwargs.get("litellm_call_id") or id(kwargs))
            if call in self._misses:
                return
            bounded_put(self._misses, call, None, 4096)
            telemetry.counting_miss(report)
        except Exception as e:  # telemetry must never fail a request
            telemetry.log.error("context-guard failure hook: %s", type(e).__name__)

    # -- the work ---------------------------------------------------------------------------
    async def _guard(
        self,
        data: dict,
        dialect: Dialect,
        *,
        route: str,
        identity: Identity,
        deployment: Deployment | None,
        reject: bool,
        fresh: bool = False,
        alias: str | None = None,
    ) -> dict:
        start = time.perf_counter()
        md_key = _md_key(data, dialect)
        md = data.get(md_key)
        md = dict(md) if isinstance(md, Mapping) else {}
        if fresh:
            md.pop(STATE_KEY, None)  # the proxy's first pass: a client cannot plant a report
        name = alias or str(data.get("model"))
        try:
            engine = self.engine
            real = deployment.model if deployment else name
            client = md.get(CLIENT_POLICY_KEY)
            policy, layers = engine.policies.resolve(
                (name, real),
                team=identity.team,
                key=identity.key,
                trusted=identity.trusted,
                client=client if isinstance(client, Mapping) else None,
            )
            summarizer = self.summarizer if policy.allows("summarize") else None
            messages = data.get("messages")
            big = isinstance(messages, list) and len(messages) >= _THREAD_THRESHOLD
            make = functools.partial(
                engine.plan, data, model=name, dialect=dialect, policy=policy, deployment=deployment,
                can_summarize=summarizer is not None,
            )
            fitted = await _drive(make, summarizer, identity.tenant, threaded=big)
        except ContextWindowExceeded as e:
            own = e.report.to_dict()
            report = _merge(md.get(STATE_KEY), own, layers)
            _store(data, md_key, md, report)
            telemetry.observe(own, route, time.perf_counter() - start, first_pass=report["passes"] == 1)
            if not reject:
                return data  # the Router's context_window_fallbacks get their chance after routing
            if route == "proxy":
                raise _proxy_rejection(e.render()) from None
            error = litellm.ContextWindowExceededError(message=e.render(), model=name, llm_provider=_provider(deployment))
            error.param = "messages"  # the proxy copies it into OpenAI's error body
            raise error from None
        except GuardError as e:  # bad body, unknown model, bad policy: a clear 400, never a silent pass
            telemetry.ERRORS.labels(type(e).__name__).inc()
            raise litellm.BadRequestError(message=str(e), model=name, llm_provider=_provider(deployment)) from None
        except Exception as e:  # a guard bug: the policy decides between serving and refusing
            telemetry.ERRORS.labels(type(e).__name__).inc()
            # the exception's message could quote a request: log its type and where it came from
            where = ", ".join(f"{f.name}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)[-4:])
            telemetry.log.error("context-guard failed on model=%s: %s at %s", name, type(e).__name__, where)
            if self._fail_open(name):
                return data
            # refused: with the exception's type only (its message could quote the request)
            raise GuardFailed(f"context-guard failed ({type(e).__name__}) and on_error is closed: request refused") from None
        own = fitted.report.to_dict()
        report = _merge(md.get(STATE_KEY), own, layers)
        others = coexistence.detect(data, litellm.callbacks)
        if others:
            report["other_context_managers"] = others
        out = fitted.body
        _store(out, md_key, md, report)
        telemetry.observe(own, route, time.perf_counter() - start, first_pass=report["passes"] == 1)
        return out

    def _fail_open(self, model: str) -> bool:
        try:
            return self.engine.policies.for_model(model).on_error == "open"
        except Exception:
            return True

    # -- sync calls ---------------------------------------------------------------------------
    def fit_kwargs(self, kwargs: Mapping[str, Any], *, router: Any = None) -> dict[str, Any]:
        """The kwargs of a chat call, fitted (raises litellm.ContextWindowExceededError)."""
        model = kwargs.get("model")
        deployment = _router_deployment(model, router) if router is not None else None
        md = kwargs.get("metadata") if isinstance(kwargs.get("metadata"), Mapping) else {}
        coro = self._guard(dict(kwargs), OPENAI, route="sdk_sync", identity=identity_from_metadata(md), deployment=deployment, reject=True)
        return _run_sync(coro)

    def wrap(self, fn: Callable[..., Any], *, router: Any = None) -> Callable[..., Any]:
        """`fn` (e.g. litellm.completion or router.completion) with its kwargs fitted first."""

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if args:
                kwargs = {**dict(zip(("model", "messages"), args)), **kwargs}
            return fn(**self.fit_kwargs(kwargs, router=router))

        return guarded


# -- helpers -------------------------------------------------------------------------------------


async def _drive(make: Callable[[], Plan], summarizer: Summarizer | None, tenant: str, *, threaded: bool) -> Fitted:
    """Make and run the planner generator; its summary requests are answered by the summarizer
    (awaited on the event loop), its CPU work runs in a worker thread for big bodies (one hop per
    step: the plan is made in the first)."""
    plans: list[Plan] = []

    def step(answer: Any) -> tuple[bool, Any]:
        if not plans:
            plans.append(make())
        return _step(plans[0], answer)

    answer: Any = None
    while True:
        done, value = await asyncio.to_thread(step, answer) if threaded else step(answer)
        if done:
            return value
        if summarizer is None:
            answer = None
        elif isinstance(value, CachedSummaries):
            answer = await summarizer.cached(value.requests, tenant)
        else:
            answer = await summarizer.summarize(value, tenant)


def _step(plan: Plan, answer: Any) -> tuple[bool, Any]:
    # a StopIteration cannot cross a thread's future: turn it into a value here
    try:
        return False, plan.send(answer)
    except StopIteration as stop:
        return True, stop.value



def _run_sync(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # called from inside a running loop (sync code in async context): run in a helper thread
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _md_key(data: Mapping[str, Any], dialect: Dialect) -> str:
    if "litellm_metadata" in data or (dialect is ANTHROPIC and "metadata" not in data):
        return "litellm_metadata"
    return "metadata"


def _report_in(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The guard's report in a logging event's kwargs (wherever LiteLLM keeps the metadata)."""
    params = kwargs.get("litellm_params")
    places = [kwargs.get("metadata"), kwargs.get("litellm_metadata")]
    if isinstance(params, Mapping):
        places += [params.get("metadata"), params.get("litellm_metadata")]
    for md in places:
        if isinstance(md, Mapping) and isinstance(md.get(STATE_KEY), Mapping) and "outcome" in md[STATE_KEY]:
            return md[STATE_KEY]
    return None


def _store(data: dict, md_key: str, md: dict, report: dict[str, Any]) -> None:
    spend = md.get("spend_logs_metadata")
    md[STATE_KEY] = report
    md["spend_logs_metadata"] = {**(spend if isinstance(spend, Mapping) else {}), STATE_KEY: telemetry.summary(report)}
    data[md_key] = md


def _merge(previous: Any, report: dict[str, Any], layers: list[str]) -> dict[str, Any]:
    """One report per request: a later pass adds only what it changed."""
    report["policy_layers"] = layers
    if not isinstance(previous, Mapping) or "outcome" not in previous:
        report["passes"] = 1
        return report
    merged = dict(previous)
    merged["passes"] = int(previous.get("passes", 1)) + 1
    if report["outcome"] == "unchanged":
        return merged
    merged.update(
        outcome=report["outcome"],
        fits=report["fits"],
        input_tokens_after=report["input_tokens_after"],
        max_tokens=report["max_tokens"],
        tokens_saved=int(previous.get("input_tokens_before", 0)) - report["input_tokens_after"],
        actions=list(previous.get("actions", [])) + report["actions"],
        reason=report.get("reason"),
        model=report["model"],
        context_window=report["context_window"],
    )
    return merged


_ProxyRejection: Any = None


def _proxy_rejection(message: str) -> Exception:
    """The proxy's own error type, rendering OpenAI's `code: context_length_exceeded` (LiteLLM
    1.106 writes the HTTP status into `code` for every other error, its own CWE included)."""
    global _ProxyRejection
    if _ProxyRejection is None:
        from litellm.proxy._types import ProxyException

        class ContextLengthExceeded(ProxyException):
            def to_dict(self) -> dict:
                return {**super().to_dict(), "code": "context_length_exceeded"}

        _ProxyRejection = ContextLengthExceeded
    return _ProxyRejection(message=message, type="invalid_request_error", param="messages", code=400)


def _provider(deployment: Deployment | None) -> str:
    if deployment and "/" in deployment.model:
        return deployment.model.split("/", 1)[0]
    return "openai"


def _proxy_router() -> Any:
    module = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(module, "llm_router", None) if module else None


def _proxy_config_path() -> str | None:
    module = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(module, "user_config_file_path", None) if module else None


def _router_deployment(alias: Any, router: Any = None) -> Deployment | None:
    """The alias's deployment(s) as the router knows them (smallest limits across them)."""
    router = router or _proxy_router()
    if router is None or not isinstance(alias, str):
        return None
    try:
        entries = router.get_model_list(model_name=alias) or []
    except Exception:
        return None
    return parse_model_list([e for e in entries if isinstance(e, Mapping)]).get(alias)


def _has_context_fallbacks(alias: Any) -> bool:
    router = _proxy_router()
    fallbacks = getattr(router, "context_window_fallbacks", None) if router else None
    if not fallbacks or not isinstance(alias, str):
        return False
    return any(isinstance(f, Mapping) and alias in f for f in fallbacks)


_default_guard: ContextGuard | None = None


def _guard_instance() -> ContextGuard:
    for cb in litellm.callbacks:
        if isinstance(cb, ContextGuard):
            return cb
    global _default_guard
    if _default_guard is None:
        _default_guard = ContextGuard(policies=PolicySet())
    return _default_guard


def completion(*args: Any, **kwargs: Any) -> Any:
    """`litellm.completion` with the request fitted first, by the ContextGuard registered in
    `litellm.callbacks` (or a default one). Same signature and return value."""
    return _guard_instance().wrap(litellm.completion)(*args, **kwargs)


__all__ = ["ContextGuard", "Identity", "completion", "identity_from_auth", "identity_from_metadata", "Policy"]
