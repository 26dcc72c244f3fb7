"""The LiteLLM adapter: one callback for the proxy and the SDK, plus the sync wrapper and instrumentation.

Where it runs (LiteLLM 1.106.2, verified by tests/e2e):
- proxy `/chat/completions` and `/v1/messages`: `async_pre_call_hook` once before routing (it fits a
  single-deployment group, or, for a group of mixed windows or with context_window_fallbacks, only
  refuses what no candidate can take), `async_filter_deployments` while routing (keeps the
  deployments that can take the request, whole if any can), then `async_pre_call_deployment_hook`
  per attempt and fallback, fitted to the deployment that serves it;
- SDK `litellm.acompletion` and `Router.acompletion`: the filter and the deployment hook;
- SDK sync `litellm.completion` / `Router.completion`: LiteLLM has no hook that can rewrite the
  request there, so `guard.completion`, `ContextGuard.wrap` and `guard.instrument()` fit it; a call
  that reaches a provider unfitted is logged and counted (`log_pre_api_call`).

Running twice is harmless: the engine is idempotent and counts are cached; reports are kept per
`litellm_call_id`, so headers and metrics describe the attempt that served the reply, counted
once. Refusals are raised as `ContextWindowExceededError` (LiteLLM's, and the guard's), which the
proxy turns into a 400 and the Router into `context_window_fallbacks`. Guard state lives in
request metadata (`metadata` on chat, `litellm_metadata` on `/v1/messages`), never in top-level
keys that would reach the provider.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import sys
import threading
import time
import traceback
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import litellm
from litellm.integrations.custom_logger import CustomLogger

from guard import coexistence, routing, telemetry
from guard.cache import SummaryCache
from guard.calibration_store import CalibrationStore
from guard.config import CacheSettings, Deployment, GuardConfig, SummarizerSettings, load_config, parse_model_list
from guard.dialects import ANTHROPIC, OPENAI, RESPONSES, Dialect
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
# "responses": the streaming success hook's name for a Responses call; "aresponses" everywhere else
_RESPONSES_CALLS = {"responses", "aresponses"}
# call types that send a prompt to a model: one of these reaching a provider unfitted is a bypass
_PROMPT_CALL_WORDS = ("completion", "responses", "messages", "generate_content")
_REPORTS: dict[str, Mapping[str, Any]] = {}  # litellm_call_id -> the report of its latest pass
_COUNTED: dict[str, None] = {}  # call ids whose request was counted in the metrics
_UNGUARDED_SEEN: dict[str, None] = {}  # call ids counted as unguarded
_BOUND = 8192


class ContextWindowExceededError(ContextWindowExceeded, litellm.ContextWindowExceededError):
    """What the guard raises through LiteLLM: LiteLLM's own context-window error (a 400 in the
    proxy, `context_window_fallbacks` in the Router) that is also `guard.ContextWindowExceeded`,
    with `.report` and `.shortfall`. `except guard.ContextWindowExceeded as e: e.report` works for
    `acompletion`, the Router and the sync wrapper alike."""

    def __init__(self, cause: ContextWindowExceeded, *, model: str, llm_provider: str, message: str | None = None) -> None:
        litellm.ContextWindowExceededError.__init__(
            self, message=message or cause.render(), model=model, llm_provider=llm_provider
        )
        self.shortfall, self.report = cause.shortfall, cause.report
        self.param = "messages"  # the proxy copies it into OpenAI's error body


def litellm_model_info(model: str) -> Mapping[str, Any] | None:
    """LiteLLM's own resolution of a model's limits (quietly: it prints a banner for unknown names)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        info = litellm.get_model_info(model)
    return dict(info) if info else None


def report_of(response: Any) -> Mapping[str, Any] | None:
    """The guard's report of the request that produced `response` (a LiteLLM response from
    `acompletion`, `Router.acompletion` or the sync wrapper), or None if the guard did not see it."""
    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, Mapping):
        return None
    report = hidden.get(STATE_KEY)
    if isinstance(report, Mapping):
        return report
    call = hidden.get("litellm_call_id")
    return _REPORTS.get(call) if isinstance(call, str) else None


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
    if name in _RESPONSES_CALLS:
        return RESPONSES
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
        router: Any = None,
    ) -> None:
        super().__init__()
        self._router = router
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
        self._calibrations: CalibrationStore | None = None
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
        self._engine = Engine(
            cfg.policies, deployments=cfg.deployments, model_map=litellm.model_cost, resolver=litellm_model_info
        )
        self._build_summarizer(cfg)

    def _build_summarizer(self, cfg: GuardConfig | None) -> None:
        settings = self._summarizer_settings or (cfg.summarizer if cfg else None)
        cache_settings = self._cache_settings or (cfg.cache if cfg else None)
        if self._cache is None:
            self._cache = SummaryCache(cache_settings)
        if self._calibrations is None:
            self._calibrations = CalibrationStore(self._cache)
        if self._engine is not None and self._engine.learned is None:
            self._engine.learned = self._calibrations.lookup
        if settings is not None and self._engine is not None:
            self._summarizer = Summarizer(settings, self._engine, self._cache, call=self._summarize_call)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._config_path = self._config_path or _proxy_config_path()
            self._build()
        assert self._engine is not None
        return self._engine

    def router(self) -> Any:
        """The LiteLLM Router whose groups and context_window_fallbacks the guard routes with: the
        one given to the constructor (`router=`) or to `wrap`/`instrument`, else the proxy's."""
        return self._router if self._router is not None else _proxy_router()

    def use_router(self, router: Any) -> None:
        self._router = router

    @property
    def summarizer(self) -> Summarizer | None:
        self.engine  # noqa: B018 - built with the engine
        return self._summarizer

    # -- LiteLLM hooks (defined on this class itself: the proxy skips inherited ones) ---------
    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> Any:
        dialect = _dialect(call_type)
        if dialect is None or not isinstance(data, dict) or dialect.messages_key not in data:
            return data
        alias = data.get("model")
        identity = identity_from_auth(user_api_key_dict)
        router = self.router()
        group = routing.deployments(router, alias) if isinstance(alias, str) else []
        chain = routing.context_fallbacks(router, alias if isinstance(alias, str) else None)
        if chain or len({routing.limits_key(d) for d in group}) > 1:
            # the router may send this to deployments (or fallbacks) of different sizes: refuse only
            # what none of them can take; each attempt is fitted to its own deployment after routing
            return await self._check_candidates(data, dialect, identity, str(alias), group, chain)
        return await self._guard(
            data,
            dialect,
            route="proxy",
            identity=identity,
            deployment=_router_deployment(alias, router),
            reject=True,
            fresh=True,
        )

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list,
        messages: list | None,
        request_kwargs: dict | None = None,
        parent_otel_span: Any = None,
    ) -> list:
        """Window-aware routing: of a group's healthy deployments, keep those that take the request
        whole if any do, else those that can after the allowed steps (all, if none can: the
        deployment hook then refuses with the numbers, which triggers context_window_fallbacks)."""
        kwargs = request_kwargs if isinstance(request_kwargs, dict) else {}
        responses = "input" in kwargs and "messages" not in kwargs  # /v1/responses: no messages
        turns = kwargs.get("input") if responses else kwargs.get("messages", messages)
        if internal_call.get(False) or len(healthy_deployments) < 2 or not isinstance(turns, (list, str)):
            return healthy_deployments
        entries = [d for d in healthy_deployments if isinstance(d, Mapping)]
        candidates = routing.from_entries(entries, model)
        if len({routing.limits_key(d) for d in candidates}) < 2:
            return healthy_deployments
        if responses:
            body, dialect = {**kwargs, "model": model}, RESPONSES
        else:
            body = {**kwargs, "messages": turns, "model": model}
            dialect = ANTHROPIC if "system" in body or _md_key(body, OPENAI) == "litellm_metadata" else OPENAI
        md = body.get(_md_key(body, dialect)) or {}
        identity = identity_from_metadata(md) if isinstance(md, Mapping) else Identity()
        try:
            verdicts = await asyncio.to_thread(self._verdicts, body, dialect, identity, model, candidates)
        except Exception as e:  # routing must never fail because of the guard
            telemetry.log.error("context-guard routing filter: %s", type(e).__name__)
            return healthy_deployments
        chosen = {id(v.deployment) for v in routing.best(verdicts)}
        kept = [entry for entry, v in zip(entries, verdicts) if id(v.deployment) in chosen]
        return kept or healthy_deployments

    def _verdicts(
        self, body: dict, dialect: Dialect, identity: Identity, group: str, candidates: list[Deployment]
    ) -> list[routing.Verdict]:
        out = []
        for d in candidates:
            policy, _ = self._policy(group, d.model, identity, body, dialect)
            out.append(routing.tier(self.engine, body, d, policy, dialect))
        return out

    async def async_pre_call_deployment_hook(self, kwargs: dict, call_type: Any) -> Any:
        dialect = _dialect(call_type)
        if dialect is None or dialect.messages_key not in kwargs or internal_call.get(False):
            return kwargs
        md = kwargs.get(_md_key(kwargs, dialect)) or {}
        model = kwargs.get("model")
        provider = kwargs.get("custom_llm_provider")
        if dialect is RESPONSES and isinstance(model, str) and "/" not in model and isinstance(provider, str) and provider:
            model = f"{provider}/{model}"  # sync litellm.responses hands the hook the bare model name
        deployment = None
        if isinstance(model, str):
            info = kwargs.get("model_info")
            base = kwargs.get("api_base")
            deployment = Deployment(model, model, dict(info) if isinstance(info, Mapping) else {}, base if isinstance(base, str) else "")
        alias = md.get("model_group") if isinstance(md, Mapping) else None
        alias = alias if isinstance(alias, str) else None
        return await self._guard(
            kwargs,
            dialect,
            route="deployment",
            identity=identity_from_metadata(md) if isinstance(md, Mapping) else Identity(),
            deployment=deployment,
            reject=True,
            alias=alias,
            chain=routing.context_fallbacks(self.router(), alias),
        )

    async def async_post_call_response_headers_hook(
        self,
        data: dict,
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, object] | None = None,
    ) -> dict[str, str] | None:
        # the latest pass of this request (after a fallback, the attempt that served it), else the
        # report in the proxy's own copy of the metadata
        call = data.get("litellm_call_id") if isinstance(data, dict) else None
        report = _REPORTS.get(call) if isinstance(call, str) else None
        if report is None and isinstance(data, dict):
            report = _report_in(data)
        return telemetry.headers(report) if report is not None else None

    async def async_post_call_success_deployment_hook(self, request_data: dict, response: Any, call_type: Any) -> Any:
        """SDK callers: the report rides on the response (`guard.report_of(response)`)."""
        report = _report_in(request_data) if isinstance(request_data, Mapping) else None
        hidden = getattr(response, "_hidden_params", None)
        if report is not None and isinstance(hidden, dict):
            hidden[STATE_KEY] = report
        return response

    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        """No silent bypass: a prompt reaching a provider without having been fitted (sync
        completion without the wrapper, a call type the guard does not handle yet) is logged once
        per call type, naming the guarded alternative, and counted. LiteLLM swallows exceptions
        from this hook, so it cannot stop the call."""
        try:
            if internal_call.get(False) or not isinstance(kwargs, Mapping):
                return
            call_type = str(kwargs.get("call_type") or "unknown")
            if not any(word in call_type for word in _PROMPT_CALL_WORDS) or _report_in(kwargs) is not None:
                return
            call = str(kwargs.get("litellm_call_id") or id(kwargs))
            if call in _REPORTS:  # fitted by a hook whose metadata the logging object does not share (sync responses)
                return
            if call in _UNGUARDED_SEEN:  # one count per call, however many guards are registered
                return
            bounded_put(_UNGUARDED_SEEN, call, None, _BOUND)
            telemetry.unguarded(call_type)
        except Exception as e:  # telemetry must never fail a request
            telemetry.log.error("context-guard bypass check: %s", type(e).__name__)

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        """What the provider's prompt cache did for a guarded request (streaming included: LiteLLM
        logs the assembled response), from the usage it reported."""
        try:
            if internal_call.get(False) or not isinstance(kwargs, Mapping):
                return
            report = _report_in(kwargs)
            if report is None:
                return
            usage = getattr(response_obj, "usage", None)
            if usage is None and isinstance(response_obj, Mapping):
                usage = response_obj.get("usage")
            split = telemetry.prompt_cache(str(report.get("model")), usage)
            notes: dict[str, Any] = {}
            if split:
                notes["prompt_cache"] = split
            ratio = telemetry.count_ratio(str(report.get("model")), telemetry.provider_input(usage), int(report.get("input_tokens_after") or 0))
            if ratio is not None:
                notes["count_ratio"] = round(ratio, 4)
                await self._learn(report, ratio)
            if notes:
                if isinstance(report, dict):
                    report.update(notes)  # the report kept for this call (`report_of`) too
                _note_in_spend_logs(kwargs, notes)
        except Exception as e:  # telemetry must never fail a request
            telemetry.log.error("context-guard success hook: %s", type(e).__name__)

    async def _learn(self, report: Mapping[str, Any], ratio: float) -> None:
        """One provider answer into the deployment's calibration record: the ratio to the guard's
        raw (unscaled) count. Only for estimated counts, and only from the provider's usage."""
        key = report.get("calibration_key")
        factor = report.get("calibration_factor")
        if not isinstance(key, str) or report.get("exact_count") or not isinstance(factor, (int, float)):
            return
        if report.get("outcome") == "rejected":
            return
        await self.calibrations.observe(key, ratio * float(factor))

    @property
    def calibrations(self) -> CalibrationStore:
        self.engine  # noqa: B018 - built with the engine
        assert self._calibrations is not None
        return self._calibrations

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        report = self._failed(kwargs)
        key = report.get("calibration_key") if report is not None else None
        factor = report.get("calibration_factor") if report is not None else None
        if isinstance(key, str) and isinstance(factor, (int, float)) and not report.get("exact_count"):  # type: ignore[union-attr]
            try:
                await self.calibrations.miss(key, float(factor))
            except Exception as e:  # telemetry must never fail a request
                telemetry.log.error("context-guard calibration miss: %s", type(e).__name__)

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._failed(kwargs)

    def _failed(self, kwargs: Any) -> Mapping[str, Any] | None:
        """A provider call failed. A context-window error on a request the guard counted as
        fitting is a counting miss: counted once per call, logged with numbers only. Returns the
        report of a counting miss (the async hook raises that deployment's factor)."""
        try:
            if not isinstance(kwargs, Mapping) or not isinstance(kwargs.get("exception"), litellm.ContextWindowExceededError):
                return None
            report = _report_in(kwargs)
            if report is None or report.get("outcome") not in ("fitted", "unchanged"):
                return None  # not checked by the guard, or let through on purpose (context_window_fallbacks)
            call = str(kwargs.get("litellm_call_id") or id(kwargs))
            if call in self._misses:
                return None
            bounded_put(self._misses, call, None, 4096)
            telemetry.counting_miss(report)
            return report
        except Exception as e:  # telemetry must never fail a request
            telemetry.log.error("context-guard failure hook: %s", type(e).__name__)
            return None

    # -- the work ---------------------------------------------------------------------------
    def _policy(self, name: str, real: str, identity: Identity, data: Mapping[str, Any], dialect: Dialect) -> tuple[Policy, list[str]]:
        md = data.get(_md_key(data, dialect))
        client = md.get(CLIENT_POLICY_KEY) if isinstance(md, Mapping) else None
        return self.engine.policies.resolve(
            (name, real),
            team=identity.team,
            key=identity.key,
            trusted=identity.trusted,
            client=client if isinstance(client, Mapping) else None,
        )

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
        chain: list[str] | None = None,
    ) -> dict:
        start = time.perf_counter()
        md_key = _md_key(data, dialect)
        md = data.get(md_key)
        md = dict(md) if isinstance(md, Mapping) else {}
        if fresh:
            md.pop(STATE_KEY, None)  # the proxy's first pass: a client cannot plant a report
        name = alias or str(data.get("model"))
        call = data.get("litellm_call_id") if isinstance(data.get("litellm_call_id"), str) else None
        layers: list[str] = []
        try:
            engine = self.engine
            real = deployment.model if deployment else name
            policy, layers = self._policy(name, real, identity, data, dialect)
            messages = data.get(dialect.messages_key)
            big = isinstance(messages, list) and len(messages) >= _THREAD_THRESHOLD
            if chain and policy.context_fallbacks == "before_cutting":
                target = await _maybe_thread(big, self._whole_elsewhere, data, dialect, identity, name, deployment, policy, chain)
                if target is not None:  # a fallback takes it whole: let the router send it there uncut
                    raise _FallBack(target)
            if policy.calibration_mode == "auto":
                await self.calibrations.fresh(engine.calibration_key(name, deployment))
            summarizer = self.summarizer if policy.allows("summarize") else None
            make = functools.partial(
                engine.plan, data, model=name, dialect=dialect, policy=policy, deployment=deployment,
                can_summarize=summarizer is not None,
            )
            fitted = await _drive(make, summarizer, identity.tenant, threaded=big)
        except _FallBack as fb:
            telemetry.fallback(name, fb.target, "before_cutting")
            message = (
                f"context-guard: {name} would have to cut this request; context_window_fallbacks "
                f"model {fb.target!r} takes it whole"
            )
            raise litellm.ContextWindowExceededError(message=message, model=name, llm_provider=_provider(deployment)) from None
        except ContextWindowExceeded as e:
            own = e.report.to_dict()
            report = _merge(md.get(STATE_KEY), own, layers)
            _store(data, md_key, md, report, call)
            final = reject and not chain
            count = final and _first_count(call)
            telemetry.observe(own, route, time.perf_counter() - start, first_pass=count)
            if chain:
                telemetry.fallback(name, chain[0], "too_long")
            if not reject:
                return data
            if route == "proxy":
                raise _proxy_rejection(e, dialect) from None
            anthropic_words = e.render_anthropic() if dialect is ANTHROPIC else None  # Anthropic clients parse them
            raise ContextWindowExceededError(e, model=name, llm_provider=_provider(deployment), message=anthropic_words) from None
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
        _store(out, md_key, md, report, call)
        telemetry.observe(own, route, time.perf_counter() - start, first_pass=_first_count(call, report["passes"] == 1))
        return out

    def _whole_elsewhere(
        self, data: dict, dialect: Dialect, identity: Identity, name: str, deployment: Deployment | None,
        policy: Policy, chain: list[str],
    ) -> str | None:
        """The first fallback group that takes the body whole, if this deployment cannot."""
        here = deployment or Deployment(name, name, {})
        if routing.tier(self.engine, data, here, policy, dialect).tier == routing.WHOLE:
            return None
        router = self.router()
        for group in chain:
            for d in routing.deployments(router, group):
                p, _ = self._policy(group, d.model, identity, data, dialect)
                if routing.tier(self.engine, data, d, p, dialect).tier == routing.WHOLE:
                    return group
        return None

    async def _check_candidates(
        self, data: dict, dialect: Dialect, identity: Identity, alias: str, group: list[Deployment], chain: list[str]
    ) -> dict:
        """Before routing, for a group of mixed windows or with context fallbacks: refuse what no
        deployment of the group or its fallbacks can take; leave the rest to each attempt."""
        md_key = _md_key(data, dialect)
        md = data.get(md_key)
        if isinstance(md, Mapping) and STATE_KEY in md:
            data[md_key] = {k: v for k, v in md.items() if k != STATE_KEY}  # a client cannot plant a report
        router = self.router()
        candidates = [(alias, d) for d in group] + [(g, d) for g in chain for d in routing.deployments(router, g)]
        if not candidates:
            return data
        start = time.perf_counter()
        messages = data.get(dialect.messages_key)
        big = isinstance(messages, list) and len(messages) >= _THREAD_THRESHOLD

        def verdicts() -> list[tuple[str, routing.Verdict]]:
            out = []
            for name, d in candidates:
                policy, _ = self._policy(name, d.model, identity, data, dialect)
                v = routing.tier(self.engine, data, Deployment(name, d.model, d.model_info), policy, dialect)
                if v.tier != routing.NONE:
                    return [(name, v)]
                out.append((name, v))
            return out

        try:
            found = await _maybe_thread(big, verdicts)
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
        call = data.get("litellm_call_id") if isinstance(data.get("litellm_call_id"), str) else None
        report["policy_layers"], report["passes"] = [], 1
        _store(data, md_key, md, report, call)
        telemetry.observe(first.report.to_dict(), "proxy", time.perf_counter() - start, first_pass=_first_count(call))
        also = "; ".join(f"{name}: needs {e.shortfall.requested} > {e.shortfall.limit}" for name, e in errors[1:])
        suffix = f" No model this request may be routed to can take it (also tried {also})." if also else ""
        raise _proxy_rejection(first, dialect, suffix, {"models_tried": report["models_tried"]}) from None

    def _fail_open(self, model: str) -> bool:
        try:
            return self.engine.policies.for_model(model).on_error == "open"
        except Exception:
            return True

    # -- sync calls ---------------------------------------------------------------------------
    def fit_kwargs(self, kwargs: Mapping[str, Any], *, router: Any = None, dialect: Dialect = OPENAI) -> dict[str, Any]:
        """The kwargs of a sync call (chat; `dialect=RESPONSES` for `litellm.responses`, whose
        metadata is `litellm_metadata`), fitted as the deployment hook fits an async one (raises
        `guard.ContextWindowExceededError`, which is LiteLLM's context-window error). Called by a
        Router (through `instrument` or `wrap(router.completion, router=...)`), the kwargs name the
        deployment (`model`, `model_info`) and its group (`metadata.model_group`)."""
        model = kwargs.get("model")
        md_key = _md_key(kwargs, dialect)
        md: Mapping[str, Any] = kwargs[md_key] if isinstance(kwargs.get(md_key), Mapping) else {}
        alias = md.get("model_group") if isinstance(md.get("model_group"), str) else None
        info = kwargs.get("model_info")
        if alias is not None and isinstance(model, str):
            deployment: Deployment | None = Deployment(alias, model, dict(info) if isinstance(info, Mapping) else {})
        else:
            deployment = _router_deployment(model, router or self._router) if (router or self._router) is not None else None
        coro = self._guard(
            dict(kwargs), dialect, route="sdk_sync", identity=identity_from_metadata(md), deployment=deployment,
            reject=True, alias=alias, chain=routing.context_fallbacks(router or self.router(), alias),
        )
        return _run_sync(coro)

    def wrap(self, fn: Callable[..., Any], *, router: Any = None, dialect: Dialect = OPENAI) -> Callable[..., Any]:
        """`fn` with its requests fitted: `wrap(litellm.completion)` fits the kwargs first
        (`wrap(litellm.responses, dialect=RESPONSES)`: a Responses API call);
        `wrap(router.completion, router=router)` fits each attempt to the deployment the Router picks,
        so window-aware fallbacks (`context_window_fallbacks`) work as in the async Router."""
        if router is not None and dialect is OPENAI:
            if self._router is None:
                self._router = router

            @functools.wraps(fn)
            def routed(*args: Any, **kwargs: Any) -> Any:
                _acquire()  # LiteLLM's completion is wrapped only while such calls run
                token = _SCOPE.set(self)
                try:
                    return fn(*args, **kwargs)
                finally:
                    _SCOPE.reset(token)
                    _release()

            return routed

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if args:
                kwargs = {**dict(zip(("model", dialect.messages_key), args)), **kwargs}
            fitted = self.fit_kwargs(kwargs, router=router, dialect=dialect)
            return _attach(fn(**fitted), fitted)

        return guarded


# -- instrumentation of LiteLLM's sync entry points ---------------------------------------------

_ORIGINAL: dict[str, Any] = {}
_INSTRUMENTED: list[ContextGuard] = []  # the guard that fits every sync call (instrument())
_SCOPE: ContextVar[ContextGuard | None] = ContextVar("context_guard_sync_scope", default=None)


def _completion_entry(*args: Any, **kwargs: Any) -> Any:
    """`litellm.completion` while instrumented: fitted first, as `acompletion` is by the hook."""
    original = _ORIGINAL.get("completion") or _litellm_completion
    guard = _SCOPE.get() or (_INSTRUMENTED[0] if _INSTRUMENTED else None)
    if guard is None or internal_call.get(False):
        return original(*args, **kwargs)
    if args:
        kwargs = {**dict(zip(("model", "messages"), args)), **kwargs}
    fitted = guard.fit_kwargs(kwargs)
    return _attach(original(**fitted), fitted)


_PATCH_LOCK = threading.Lock()
_USERS = [0]  # sync Router calls through `wrap(..., router=)` running now


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


def instrument(guard: ContextGuard | None = None, *, router: Any = None) -> ContextGuard:
    """Fit every sync `litellm.completion` call, including those a sync `Router.completion` makes
    per attempt (fallbacks included), like their async forms. Idempotent; `uninstrument()` puts
    LiteLLM's own function back. Returns the guard in use (the registered one by default)."""
    g = guard or _guard_instance()
    if router is not None:
        g.use_router(router)
    with _PATCH_LOCK:
        _INSTRUMENTED[:] = [g]
        _install()
    return g


def uninstrument() -> None:
    """Undo `instrument()`: LiteLLM's own `completion` again."""
    with _PATCH_LOCK:
        _INSTRUMENTED.clear()
        if _USERS[0] == 0:
            _restore()


def is_instrumented() -> bool:
    return bool(_INSTRUMENTED) and "completion" in _ORIGINAL


def _attach(response: Any, fitted: Mapping[str, Any]) -> Any:
    """Put the report on a sync response, where `report_of` finds it."""
    report = _report_in(fitted)
    hidden = getattr(response, "_hidden_params", None)
    if report is not None and isinstance(hidden, dict):
        hidden[STATE_KEY] = report
    return response


# -- helpers -------------------------------------------------------------------------------------


class _FallBack(Exception):
    def __init__(self, target: str) -> None:
        self.target = target


async def _maybe_thread(threaded: bool, fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args) if threaded else fn(*args)


def _first_count(call: str | None, default: bool = True) -> bool:
    """Whether this pass should count the request in the metrics: once per call id."""
    if call is None:
        return default
    if call in _COUNTED:
        return False
    bounded_put(_COUNTED, call, None, _BOUND)
    return True


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
    """Where LiteLLM keeps a request's metadata. On the Responses API `metadata` is a field the
    provider receives (strings only): the guard's record always goes to `litellm_metadata`."""
    if "litellm_metadata" in data or dialect is RESPONSES or (dialect is ANTHROPIC and "metadata" not in data):
        return "litellm_metadata"
    return "metadata"


def _metadata_places(kwargs: Mapping[str, Any]) -> list[Any]:
    """Everywhere LiteLLM keeps a logging event's request metadata."""
    params = kwargs.get("litellm_params")
    places = [kwargs.get("metadata"), kwargs.get("litellm_metadata")]
    if isinstance(params, Mapping):
        places += [params.get("metadata"), params.get("litellm_metadata")]
    return places


def _report_in(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The guard's report in a logging event's kwargs (wherever LiteLLM keeps the metadata)."""
    for md in _metadata_places(kwargs):
        if isinstance(md, Mapping) and isinstance(md.get(STATE_KEY), Mapping) and "outcome" in md[STATE_KEY]:
            return md[STATE_KEY]
    return None


def _note_in_spend_logs(kwargs: Mapping[str, Any], notes: dict[str, Any]) -> None:
    """What the provider's answer told (cache usage, its count against the guard's) into the
    spend-logs record of the guard, wherever the logging metadata carries it (LiteLLM's standard
    logging payload included, for the loggers after us)."""
    places = _metadata_places(kwargs)
    slo = kwargs.get("standard_logging_object")
    if isinstance(slo, Mapping):
        places.append(slo.get("metadata"))
    for md in places:
        spend = md.get("spend_logs_metadata") if isinstance(md, Mapping) else None
        record = spend.get(STATE_KEY) if isinstance(spend, Mapping) else None
        if isinstance(record, dict):
            record.update(notes)


def _store(data: dict, md_key: str, md: dict, report: dict[str, Any], call: str | None = None) -> None:
    if call is not None:
        bounded_put(_REPORTS, call, report, _BOUND)
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


def _proxy_rejection(
    e: ContextWindowExceeded, dialect: Dialect, suffix: str = "", extra: Mapping[str, Any] | None = None
) -> Exception:
    """The proxy's own error type, rendering OpenAI's `code: context_length_exceeded` (LiteLLM
    1.106 writes the HTTP status into `code` for every other error, its own CWE included); on
    /v1/messages the message starts in Anthropic's words (`prompt is too long: N tokens > M maximum`)."""
    global _ProxyRejection
    if _ProxyRejection is None:
        from litellm.proxy._types import ProxyException

        class ContextLengthExceeded(ProxyException):
            def to_dict(self) -> dict:
                return {**super().to_dict(), "code": "context_length_exceeded"}

        _ProxyRejection = ContextLengthExceeded
    message = (e.render_anthropic() if dialect is ANTHROPIC else e.render()) + suffix
    # the headers ride on the exception: /v1/messages answers errors from it without the headers hook
    headers = telemetry.headers({**e.report.to_dict(), **(extra or {})})
    param = dialect.messages_key  # "input" on the Responses API, as OpenAI's own error names it
    return _ProxyRejection(message=message, type="invalid_request_error", param=param, code=400, headers=headers)


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
    return _guard_instance().wrap(_ORIGINAL.get("completion") or litellm.completion)(*args, **kwargs)


def responses(*args: Any, **kwargs: Any) -> Any:
    """`litellm.responses` (the OpenAI Responses API, sync) with the request fitted first, like
    `completion`. LiteLLM has no hook that can rewrite a sync call; async `litellm.aresponses`
    and `Router.aresponses` are fitted by the callback itself."""
    return _guard_instance().wrap(litellm.responses, dialect=RESPONSES)(*args, **kwargs)


_litellm_completion = litellm.completion  # LiteLLM's own, whatever is patched later

__all__ = [
    "ContextGuard",
    "ContextWindowExceededError",
    "Identity",
    "Policy",
    "completion",
    "identity_from_auth",
    "identity_from_metadata",
    "instrument",
    "is_instrumented",
    "report_of",
    "responses",
    "uninstrument",
]
