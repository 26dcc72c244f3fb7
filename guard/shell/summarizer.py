"""The summarizer: the shell that answers the planner's SummaryRequests with an LLM.

One summary is budgeted like any request: the call's input (instructions + transcript) plus its
explicit `max_tokens` (the request's, see `guard.fit.spans.output_budget`, clamped to the
summarizer's output cap) plus the margin must fit the summarizer model's window. A span larger
than that is summarized in chunks and the partial summaries merged (map-reduce), each call budgeted the same way.

Calls go out through LiteLLM (in the proxy through its router, so the summarizer can be any
model_list name) with the `internal_call` flag set, so the guard's own deployment hook lets them
through instead of fitting them again. Every failure — timeout, provider error, an empty or an
oversized answer, an open circuit — becomes a `SummaryAnswer` without text and a reason: the
planner goes on with the deterministic strategies and the report says what was skipped and why.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from guard.core.breaker import CircuitBreaker
from guard.core.budget import make_budget
from guard.core.config import SummarizerSettings
from guard.core.memo import using
from guard.dialects import OPENAI
from guard.fit import summary
from guard.fit.engine import Engine
from guard.fit.planner import SummaryAnswer, SummaryRequest
from guard.fit.spans import WITHHELD, lines_of
from guard.shell import router_api
from guard.state import telemetry
from guard.state.cache import SummaryCache

# set around the guard's own LLM calls so its deployment hook lets them through (no recursion)
internal_call: contextvars.ContextVar[bool] = contextvars.ContextVar("context_guard_internal", default=False)

Call = Callable[[str, list[dict[str, str]], int, float], Awaitable[str | None]]


@dataclass(frozen=True)
class Summarizing:
    """A summarizer's settings and the LLM call it makes (None: LiteLLM's, through the router):
    `call(model, messages, max_tokens, timeout)` answers the summary text, or None."""

    settings: SummarizerSettings | Mapping[str, Any]
    call: Call | None = None


class SummarizerFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Summarizer:
    """Answers the planner's summary requests with LLM calls through LiteLLM: each call budgeted
    (explicit max_tokens, input within the summarizer's window, map-reduce beyond it), cached per
    tenant, bounded by a timeout and a circuit breaker; any failure is "no summary", never an error."""

    def __init__(
        self,
        settings: SummarizerSettings,
        engine: Engine,
        cache: SummaryCache | None = None,
        call: Call | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.cache = cache or SummaryCache()
        self._call = call or self._litellm_call
        self.breaker = CircuitBreaker(settings.failure_threshold, settings.cooldown_seconds, clock)
        self._exact = False
        self.budget()  # an unknown summarizer model is a start-up error, not a per-request one

    def budget(self) -> tuple[int, int, Any]:
        """(input room per call, max_tokens per call, counter) for the summarizer model."""
        model = self.settings.model
        policy = self.engine.policy_for(model)
        limits = self.engine.limits_for(model, policy)
        counter, self._exact = self.engine.counter_for(model, policy)
        wanted = self.engine.policies.defaults.summary_max_tokens
        budget, _ = make_budget(limits, policy, min(wanted, limits.max_output_tokens))
        return budget.room, budget.reserved_output, counter

    def keyed(self, request: SummaryRequest, tenant: str, cap: int) -> tuple[str, list[str], int]:
        max_tokens = min(request.max_tokens, cap)
        lines = [] if request.span else lines_of(request)  # (a span a client slid out: known by its digest)
        digest = request.span or summary.span_digest(lines)
        return summary.summary_key(tenant, self.settings.model, max_tokens, digest), lines, max_tokens

    async def cached(self, requests: Sequence[SummaryRequest], tenant: str) -> tuple[str | None, ...]:
        """The cached summary of each span, or None (never calls the model). A plan's spans
        nest, so their transcript is hashed once for all of them (`summary.span_digests`)."""
        _, cap, _ = self.budget()
        with using(self.engine.memos):  # (the transcript lines and digests: the engine's memos)
            digests = iter(summary.span_digests([lines_of(r) for r in requests if not r.span]))
            spans = [(min(r.max_tokens, cap), r.span or next(digests)) for r in requests]
        keys = [summary.summary_key(tenant, self.settings.model, *span) for span in spans]
        return tuple(await self.cache.get_many(keys))

    async def summarize(self, request: SummaryRequest, tenant: str) -> SummaryAnswer:
        room, cap, counter = self.budget()
        with using(self.engine.memos):
            key, lines, max_tokens = self.keyed(request, tenant, cap)
        cached = await self.cache.get(key)
        if cached is not None:
            return SummaryAnswer(cached, source="cache")
        if request.span:  # its messages are gone: no summary can be made of them again
            return SummaryAnswer(None, "summary_gone", calls=0)
        if not self.breaker.allow():
            return SummaryAnswer(None, "summarizer_circuit_open", calls=0)
        calls = [0]
        try:
            text = await asyncio.wait_for(
                self._map_reduce(lines, room, max_tokens, counter, calls), self.settings.timeout_seconds
            )
        except asyncio.TimeoutError:
            return self._failed("summarizer_timeout", calls[0])
        except SummarizerFailed as e:
            return self._failed(e.reason, calls[0])
        except Exception as e:  # provider errors of every kind: the request goes on without a summary
            telemetry.log.warning("context-guard summarizer failed: %s", type(e).__name__)
            return self._failed("summarizer_error", calls[0])
        self.breaker.success()
        await self.cache.set(key, text)
        return SummaryAnswer(text, source="llm", calls=calls[0])

    def _failed(self, reason: str, calls: int) -> SummaryAnswer:
        self.breaker.failure()
        telemetry.SUMMARIZER_CALLS.labels(reason).inc()
        return SummaryAnswer(None, reason, calls=calls)

    async def _map_reduce(
        self, lines: Sequence[str], room: int, max_tokens: int, counter: Any, calls: list[int]
    ) -> str:
        merge = False
        while True:
            overhead = self._overhead(counter, max_tokens, merge)

            def tokens(text: str) -> int:  # as the budget counts them: calibrated for estimated families
                return cast("int", math.ceil(counter.raw(text) * counter.factor))

            counts = [tokens(line) + 4 for line in lines]
            parts = summary.chunks(lines, counts, room - overhead, tokens)
            if merge and len(parts) >= len(lines):
                raise SummarizerFailed("summarizer_window_too_small")  # merging would never converge
            answers = [await self._one(part, max_tokens, counter, merge, calls) for part in parts]
            if len(answers) == 1:
                return answers[0]
            lines, merge = answers, True

    def _overhead(self, counter: Any, max_tokens: int, merge: bool) -> int:
        frame = [
            {"role": "system", "content": summary.system_prompt(max_tokens, merge=merge)},
            {"role": "user", "content": summary.render([], merge=merge)},
        ]
        return cast("int", sum(counter.messages(OPENAI, frame)) + counter.fixed(OPENAI, {}) + 16)

    async def _one(self, lines: Sequence[str], max_tokens: int, counter: Any, merge: bool, calls: list[int]) -> str:
        messages = [
            {"role": "system", "content": summary.system_prompt(max_tokens, merge=merge)},
            {"role": "user", "content": summary.render(lines, merge=merge)},
        ]
        calls[0] += 1
        answer = await self._call(self.settings.model, messages, max_tokens, self.settings.timeout_seconds)
        text = answer.strip() if isinstance(answer, str) else ""
        # an answer longer than max_tokens means a provider that ignored it; the slack covers a
        # count made with another tokenizer than the summarizer's own (estimated families)
        slack = 1.1 if self._exact else 1.5
        verdict = summary.check(text, counter.raw(text), math.floor(max_tokens * slack))
        if not verdict.ok:
            raise SummarizerFailed(str(verdict.reason))
        telemetry.SUMMARIZER_CALLS.labels("ok").inc()
        return text

    async def _litellm_call(
        self, model: str, messages: list[dict[str, str]], max_tokens: int, timeout: float
    ) -> str | None:
        import litellm

        kwargs: dict[str, Any] = {
            **self.settings.litellm_params,
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "timeout": timeout,
            "num_retries": 0,
        }
        token = internal_call.set(True)
        try:
            router = _proxy_router()
            if router is not None and model in router_api.model_names(router):
                response = await router.acompletion(**kwargs, fallbacks=[])
            else:
                response = await litellm.acompletion(**kwargs)
        finally:
            internal_call.reset(token)
        return cast("str | None", response.choices[0].message.content)


async def withhold(summarizer: Summarizer, request: SummaryRequest, tenant: str) -> None:
    """Remember in `summarizer`'s cache that a cut went without its summary (the planner's
    `WithheldSummary`, its one request's key): every worker's replay then sizes the cut as sent."""
    _, cap, _ = summarizer.budget()
    with using(summarizer.engine.memos):
        key = summarizer.keyed(request, tenant, cap)[0]
    await summarizer.cache.set(key, WITHHELD)


def _proxy_router() -> Any:
    module = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(module, "llm_router", None) if module else None
