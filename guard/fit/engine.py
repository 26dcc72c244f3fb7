"""The engine: one object that resolves a request's model, policy, limits and counter, and fits it.

    engine = Engine.from_guard_config(guard.load_config("proxy_config.yaml"))
    fitted = engine.fit(body)          # -> Fitted(body, report), or raises ContextWindowExceeded

The engine never mutates the body it is given; token counts are memoised across requests per
(encoding, calibration, image formula), so an agent loop's next turn only counts its new messages,
and the pure helpers' memos (JSON parses and rewrites, relevance terms, transcript lines) are the
engine's own (`memos`, current while it plans or counts: see guard.core.memo).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from guard.core import calibration
from guard.core.config import Deployment, GuardConfig, load_config
from guard.core.counters import Counters
from guard.core.encodings import get_vocab
from guard.core.errors import BadRequest
from guard.core.limits import ModelLimits, Resolver, lookup, resolve_limits
from guard.core.memo import Memos, using
from guard.core.modelmap import bundled_model_map, litellm_available, litellm_resolver
from guard.core.models import profile
from guard.core.policy import Policy, PolicySet
from guard.core.tokens import Encoding, TokenCounter
from guard.dialects import Dialect, by_name, detect
from guard.fit.edited import LastCut, rollout
from guard.fit.factor_change import carrying, counted_then
from guard.fit.planner import Fitted, Plan, SummaryRequest, run
from guard.fit.request import Resolved
from guard.fit.temperature import Anchor, Seen, SeenLog, Temperature, fingerprint, judge, ttl_seconds


class _Deprecated:
    """Names kept for a minor release after they changed, each warning with its replacement (CHANGELOG.md)."""

    @classmethod
    def from_config(cls, path: str | Path, **kwargs: Any) -> Engine:
        """Deprecated since 0.2.0, removed in 0.3.0: `Engine.from_guard_config(guard.load_config(path))`."""
        warnings.warn(
            "Engine.from_config(path) is deprecated since context-guard 0.2.0 and goes in 0.3.0: "
            "use Engine.from_guard_config(guard.load_config(path))",
            DeprecationWarning,
            stacklevel=2,
        )
        return Engine.from_guard_config(load_config(path), **kwargs)


class _Resolving(_Deprecated):
    """What an engine resolves for a model name: the real model, its policy, limits, calibration key
    and counter (see `Engine`)."""

    policies: PolicySet
    deployments: dict[str, Deployment]
    resolver: Resolver | None
    learned: Callable[[str], tuple[list[float], float | None]] | None
    counters: Counters
    _model_map: Mapping[str, Any] | None

    @property
    def model_map(self) -> Mapping[str, Any]:
        return self._model_map if self._model_map is not None else bundled_model_map()

    # -- resolution -------------------------------------------------------------------------
    def underlying(self, model: str) -> str:
        deployment = self.deployments.get(model)
        return deployment.model if deployment else model

    def policy_for(self, model: str) -> Policy:
        return self.policies.for_model(model, self.underlying(model))

    def limits_for(self, model: str, policy: Policy, deployment: Deployment | None = None) -> ModelLimits:
        deployment = deployment or self.deployments.get(model)
        info, real = (deployment.model_info, deployment.model) if deployment else (None, model)
        return resolve_limits(
            model, policy, model_map=self.model_map, resolver=self.resolver, model_info=info, underlying=real
        )

    def calibration_key(self, model: str, deployment: Deployment | None = None) -> str:
        """The deployment a request to `model` is counted for (see `guard.core.calibration.key`)."""
        deployment = deployment or self.deployments.get(model)
        real = deployment.model if deployment else self.underlying(model)
        return calibration.key(real, deployment.api_base if deployment else "")

    def counter_for(
        self, model: str, policy: Policy, underlying: str | None = None, key: str | None = None
    ) -> tuple[TokenCounter, bool]:
        """The shared counter for a model and whether its counts are exact."""
        counter, exact, _ = self.counter_and_factor(model, policy, underlying, key)
        return counter, exact

    def counter_and_factor(
        self, model: str, policy: Policy, underlying: str | None = None, key: str | None = None
    ) -> tuple[TokenCounter, bool, calibration.Factor]:
        """The counter, whether it is exact, and the calibration factor it counts with (see
        `guard.core.counters.Counters.get`; `learned` is read at each call)."""
        return self.counters.get(underlying or self.underlying(model), policy, self._taught(key))

    def count_factor(
        self, model: str, policy: Policy, underlying: str | None = None, key: str | None = None
    ) -> calibration.Factor:
        """The calibration factor `counter_and_factor` gives, without building the counter (no
        tokenizer is loaded): what the limits announced to agents are scaled by
        (`guard.core.announce`)."""
        return self.counters.factor(underlying or self.underlying(model), policy, self._taught(key))

    def _taught(self, key: str | None) -> Callable[[], tuple[list[float], float | None]] | None:
        """What the deployment `key`'s provider answers taught, read when asked (None: nothing to read)."""
        learned = self.learned
        return (lambda: learned(key)) if learned is not None and key is not None else None

    def warm(self, models: tuple[str, ...] | None = None) -> tuple[str, ...]:
        """Load the tokenizers `models` count with (by default every configured deployment's), and,
        where two threads count (`guard.core.tokens.set_counting_threads`), their twins for the
        second (`TokenCounter.prepare_threads`), so that no request pays for them: loading one
        takes ~0.3-0.5 s and its twin ~0.7 s, which the first request (the first large cold one) in
        each process (each proxy worker) that counts with it would pay. The model names warmed."""
        names = tuple(self.deployments) if models is None else models
        for name in names:
            self.counter_for(name, self.policy_for(name))[0].prepare_threads()
        return names

    def _counting(
        self, name: str, policy: Policy, deployment: Deployment | None
    ) -> tuple[str, str, tuple[TokenCounter, bool, calibration.Factor]]:
        """The real model behind `name`, its calibration key, and its counter, exactness and factor."""
        deployment = deployment or self.deployments.get(name)
        real = deployment.model if deployment else self.underlying(name)
        key = self.calibration_key(name, deployment)
        return real, key, self.counter_and_factor(name, policy, real, key)

    def _adaptive_thinking(self, model: str) -> bool:
        """Whether LiteLLM maps reasoning_effort to adaptive thinking (no budget) for this model."""
        entry = lookup(self.model_map, model)
        return bool(entry and entry.get("supports_adaptive_thinking"))


class Engine(_Resolving):
    """The pure core in one object: resolves a request's model, policy, limits and token counter,
    and fits it (`fit`) or hands out the planner generator (`plan`) for a shell that summarizes.
    Never imports LiteLLM; safe to share across threads."""

    def __init__(
        self,
        policies: PolicySet | None = None,
        *,
        deployments: Mapping[str, Deployment] | None = None,
        model_map: Mapping[str, Any] | None = None,
        resolver: Resolver | Literal["litellm"] | None = "litellm",
        sources: Sources | None = None,
        **moved: Any,
    ) -> None:
        """`resolver`: limits of a model name the map does not hold exactly. By default LiteLLM's
        own `get_model_info` when LiteLLM is installed (imported on the first such name only, so
        `Engine()` resolves what the hooks and the CLI resolve; the core imports nothing of
        LiteLLM's until then); None: the raw map and the policy alone. `sources`: see `Sources`
        (its fields as keywords of their own: deprecated since 0.3.0)."""
        sources = _moved_sources(sources, moved)
        self.policies = policies or PolicySet()
        self.deployments = dict(deployments or {})
        self._model_map = model_map
        self.resolver: Resolver | None = (
            (litellm_resolver if litellm_available() else None) if resolver == "litellm" else resolver
        )
        # the shell's record of what providers reported per deployment: (recent ratios, miss floor)
        self.learned = sources.learned
        self.counters = Counters(sources.encoding_loader)
        self.conversations = sources.conversations if sources.conversations is not None else SeenLog()
        self.clock = sources.clock
        self.memos = Memos()  # the pure helpers' memos, current while this engine plans or counts

    @classmethod
    def from_guard_config(cls, config: GuardConfig, **kwargs: Any) -> Engine:
        return cls(config.policies, deployments=config.deployments, **kwargs)

    def plan(
        self,
        body: Mapping[str, Any],
        *,
        model: str | None = None,
        dialect: Dialect | str | None = None,
        policy: Policy | None = None,
        deployment: Deployment | None = None,
        can_summarize: bool = False,
        **moved: Any,
    ) -> Plan:
        """`plan_for` a `FitRequest` of these fields (`temperature=`, `conversation=`: deprecated
        since 0.3.0, `FitRequest(..., judged=Judged(temperature, conversation))`)."""
        return self.plan_for(FitRequest(body, model, dialect, policy, deployment, can_summarize, _moved_judged(moved)))

    def plan_for(self, request: FitRequest) -> Plan:
        """The planner generator for one request (see guard.fit.planner). `deployment` names the
        real model and model_info behind `model` when the caller knows them (the LiteLLM hooks do).
        The conversation's cache temperature is judged from `conversations` and the clock, and the
        fit recorded there, unless the shell judged it (`request.judged.temperature`: its shared
        log failed, `temperature.UNKNOWN`). `request.judged.conversation`: the body's
        `conversation_key`, when the shell has it already."""
        body, deployment = request.body, request.deployment
        name, d = _named(body, request.model, request.dialect)
        policy = request.policy or self.policy_for(name)
        limits = self.limits_for(name, policy, deployment)
        real, key, (counter, exact, factor) = self._counting(name, policy, deployment)
        family = profile(real).family
        now = self.clock()
        temperature, conversation = request.judged.temperature, request.judged.conversation
        if temperature is not None:
            conversation = None  # judged by the shell: not recorded
        else:
            conversation = conversation or self.conversation_key(body, name, d)
            ttl = ttl_seconds(policy.cache_ttl_seconds, family, body)
            temperature = judge(self.conversations.get(conversation), now, ttl)
        resolved = Resolved(
            d, limits, policy, counter, exact, family, self._adaptive_thinking(real), (key, factor.source)
        )
        # (a conversation whose cut was counted with another factor: `guard.fit.factor_change`)
        then = counted_then(self.counters, resolved, temperature, len(d.messages(body)))
        planned = carrying(
            body, resolved, then, can_summarize=request.can_summarize, temperature=temperature, replay=request.replay
        )
        inner = _owned(planned, self.memos)
        if conversation is None:
            return inner
        return _recorded(inner, self.conversations, conversation, now, temperature, (d, body))

    def conversation_key(self, body: Mapping[str, Any], model: str, dialect: Dialect | str | None = None) -> str:
        """The fingerprint `conversations` knows a request's conversation by (model, pinned prompt, task)."""
        return fingerprint(_dialect(body, dialect), body, model)

    def count(
        self,
        body: Mapping[str, Any],
        *,
        model: str | None = None,
        dialect: Dialect | str | None = None,
        policy: Policy | None = None,
    ) -> int:
        """The input tokens the guard counts for a body (calibrated, as `fit` reports them in
        `input_tokens_before`): what the proxy's token-counting endpoints answer for its models."""
        name, d = _named(body, model, dialect)
        policy = policy or self.policy_for(name)
        _, _, (counter, _, _) = self._counting(name, policy, None)
        with using(self.memos):
            return counter.body(d, body)

    def fit(
        self,
        body: Mapping[str, Any],
        *,
        model: str | None = None,
        dialect: Dialect | str | None = None,
        policy: Policy | None = None,
        deployment: Deployment | None = None,
        summarize: Callable[[SummaryRequest], str | None] | None = None,
    ) -> Fitted:
        """Fit a body, or raise ContextWindowExceeded (with the report on the exception)."""
        p = self.plan_for(FitRequest(body, model, dialect, policy, deployment, can_summarize=summarize is not None))
        return run(p, summarize)


@dataclass(frozen=True)
class Sources:
    """Where an engine reads what is not in a request: the encodings (`encoding_loader`), what
    providers reported per deployment (`learned`: recent ratios and the miss floor, by calibration
    key; None: static factors), when each conversation was last sent and its anchor
    (`conversations`, cache temperature, see guard.fit.temperature; None: a bounded log in memory),
    and the time (`clock`)."""

    encoding_loader: Callable[[str], Encoding] = get_vocab
    learned: Callable[[str], tuple[list[float], float | None]] | None = None
    conversations: SeenLog | None = None
    clock: Callable[[], float] = time.time


@dataclass(frozen=True)
class Judged:
    """What the shell judged of a request's conversation before the engine: its cache temperature
    (None: the engine judges it from its own log) and its `conversation_key` (None: worked out)."""

    temperature: Temperature | None = None
    conversation: str | None = None


@dataclass(frozen=True)
class FitRequest:
    """One body to fit and what the caller knows of it (see `Engine.plan_for`): the model it names
    (None: the body's `model`), its dialect (None: its shape says), the policy (None: the engine's
    for the model), the deployment behind the model, whether the driver can summarize, what the
    shell judged of the conversation, and whether the history's past turns may be replayed to find
    the cut it carries (`replay`; False on a busy worker: a request with no record of its
    conversation's last turn is then cut as a cold cache's is, its cut anchored for later turns,
    at the cost of one fit of the request instead of one per past crossing of its band)."""

    body: Mapping[str, Any]
    model: str | None = None
    dialect: Dialect | str | None = None
    policy: Policy | None = None
    deployment: Deployment | None = None
    can_summarize: bool = False
    judged: Judged = Judged()
    replay: bool = True


def _moved_sources(sources: Sources | None, moved: dict[str, Any]) -> Sources:
    """`sources`, with the deprecated keywords of `Engine()` that set its fields."""
    return _moved(Sources, sources or Sources(), moved, "Engine(sources=Sources(...))")


def _moved_judged(moved: dict[str, Any]) -> Judged:
    """The deprecated `temperature` and `conversation` keywords of `Engine.plan`, as a `Judged`."""
    return _moved(Judged, Judged(), moved, "Engine.plan_for(FitRequest(..., judged=Judged(...)))")


_T = TypeVar("_T", Sources, Judged)


def _moved(kind: type[_T], base: _T, moved: dict[str, Any], instead: str) -> _T:
    unknown = set(moved) - {f.name for f in fields(kind)}
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    if not moved:
        return base
    warnings.warn(
        f"the keyword(s) {', '.join(sorted(moved))} are deprecated since context-guard 0.3.0 and go in 0.4.0: "
        f"use {instead}",
        DeprecationWarning,
        stacklevel=4,
    )
    return replace(base, **moved)


def _named(body: Mapping[str, Any], model: str | None, dialect: Dialect | str | None) -> tuple[str, Dialect]:
    """A body's model name and dialect, or BadRequest."""
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    name = model or body.get("model")
    if not isinstance(name, str) or not name:
        raise BadRequest("the request names no model (pass one or set 'model' in the body)")
    return name, _dialect(body, dialect)


def _dialect(body: Mapping[str, Any], dialect: Dialect | str | None) -> Dialect:
    """The dialect named (or given), else the one the body's shape says."""
    return by_name(dialect) if isinstance(dialect, str) else dialect or detect(body)


def _owned(inner: Plan, memos: Memos) -> Plan:
    """`inner`, run with `memos` current: set before each step of the generator and put back
    after it, so a driver that interleaves other work between steps (an async shell awaiting a
    summary) never sees them."""
    answer: Any = None
    started = False
    while True:
        with using(memos):
            try:
                request = inner.send(answer) if started else next(inner)
            except StopIteration as stop:
                return cast("Fitted", stop.value)
        started = True
        answer = yield request


def _recorded(
    inner: Plan,
    log: SeenLog,
    conversation: str,
    now: float,
    temperature: Temperature,
    request: tuple[Dialect, Mapping[str, Any]],
) -> Plan:
    """`inner`, and the conversation recorded in `log` as sent now when it fits: with the anchor
    its cut was carried from (an uncut request keeps the one it had), and the cut it carried beside
    those of other rollouts of its task (`Seen.kept`; the rollout is `request`'s, a dialect and body)."""
    fitted = yield from inner
    report = fitted.report
    anchor = Anchor.from_dict(report.anchor) if report.anchor else None
    if anchor is None and report.cut is None:
        anchor = temperature.anchor
    last = LastCut.from_dict(report.carried)
    if last is not None:
        of = last.rollout
    elif temperature.last is not None or temperature.others or temperature.earlier:
        of = rollout(request[0], request[0].messages(request[1]))
    else:
        of = ""
    log.put(conversation, Seen.kept(now, anchor, last, temperature, of))
    return fitted
