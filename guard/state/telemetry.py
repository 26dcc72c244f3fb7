"""What the guard tells the outside world: response headers, logging metadata, Prometheus metrics.

Everything here is built from the report (counts, names, hashes); no function receives text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Histogram

log = logging.getLogger("context_guard")

HEADER_PREFIX = "x-context-guard-"

REQUESTS = Counter("context_guard_requests", "Requests checked by the guard", ["model", "outcome"])
TOKENS_SAVED = Counter("context_guard_tokens_saved", "Input tokens removed, by strategy", ["model", "strategy"])
REJECTIONS = Counter("context_guard_rejections", "Requests refused before the provider", ["model"])
ERRORS = Counter("context_guard_errors", "Guard failures (the request went on per on_error)", ["kind"])
SUMMARIES = Counter(
    "context_guard_summaries",
    "Summaries the summarize step asked for, by where they came from or why there was none",
    ["result"],
)
SUMMARIZER_CALLS = Counter("context_guard_summarizer_calls", "LLM calls made for summaries", ["outcome"])
CACHE = Counter("context_guard_summary_cache", "Summary cache operations", ["op", "result"])
CACHE_TEMPERATURE = Counter(
    "context_guard_cache_temperature",
    "Requests by the provider cache temperature the guard judged (cold, warm, unknown) "
    "and whether their cut was anchored",
    ["model", "temperature", "anchored"],
)
COUNTING_MISSES = Counter(
    "context_guard_counting_misses",
    "Requests the guard counted as fitting that the provider still refused as too long",
    ["model"],
)
FALLBACKS = Counter(
    "context_guard_fallbacks",
    "Requests the guard handed to a context_window_fallbacks model instead of cutting or refusing them",
    ["model", "to", "reason"],
)
UNGUARDED = Counter(
    "context_guard_unguarded_calls",
    "Prompts the guard did not fit while it was registered (forwarded or refused), by call type",
    ["call_type"],
)
PROMPT_CACHE = Counter(
    "context_guard_prompt_cache_tokens",
    "Input tokens by provider prompt-cache status, from the provider's own usage report",
    ["model", "kind"],
)
COUNT_RATIO = Histogram(
    "context_guard_count_ratio",
    "Input tokens the provider reported / the guard's count of the body it forwarded",
    ["model"],
    buckets=(0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0, 3.0),
)
HURRIED = Counter(
    "context_guard_hurried_fits",
    "Heavy fits and routing checks that waited past heavy_fits.wait_seconds for a turn and went on at once "
    "(a fit the deterministic way)",
)
LATENCY = Histogram(
    "context_guard_latency_seconds",
    "Time the guard added to a request",
    ["route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)


def summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The flat, numeric-first record kept in logging metadata (spend logs, Langfuse, OTel)."""
    return {
        "outcome": report.get("outcome"),
        "model": report.get("model"),
        "context_window": report.get("context_window"),
        "input_tokens_before": report.get("input_tokens_before"),
        "input_tokens_after": report.get("input_tokens_after"),
        "tokens_saved": report.get("tokens_saved"),
        "max_tokens": report.get("max_tokens"),
        "safety_margin_tokens": report.get("safety_margin_tokens"),
        "actions": {a["kind"]: a["tokens_saved"] for a in report.get("actions", [])},
        "skipped": [s["kind"] + ":" + s["reason"] for s in report.get("skipped", [])],
        "policy": report.get("policy_layers", []),
        "passes": report.get("passes", 1),
        "fitted_messages_sha256": report.get("fitted_messages_sha256"),
        "summary": report.get("summary"),
        "other_context_managers": report.get("other_context_managers", []),
        "unseen_state": report.get("unseen_state", []),
        "reasoning": report.get("reasoning", []),
        "models_tried": report.get("models_tried", []),
        "cut": report.get("cut"),
        "cache_temperature": report.get("cache_temperature"),
        "idle_seconds": report.get("idle_seconds"),
        "anchored": bool(report.get("anchor")),
        "calibration": [report.get("calibration_factor"), report.get("calibration_source")],
        "count_ratio": report.get("count_ratio"),  # provider / guard input tokens, once it answered
        "prompt_cache": report.get("prompt_cache"),  # the provider's answer: read / write / uncached
    }


def headers(report: Mapping[str, Any]) -> dict[str, str]:
    out = {
        "outcome": str(report.get("outcome")),
        "tokens-before": str(report.get("input_tokens_before")),
        "tokens-after": str(report.get("input_tokens_after")),
        "max-tokens": str(report.get("max_tokens")),
        "window": str(report.get("context_window")),
        "model": str(report.get("model")),
        # what the next turn may add before the guard has to cut (negative: how far over it was)
        "room-left": str(int(report.get("room") or 0) - int(report.get("input_tokens_after") or 0)),
        "actions": ";".join(f"{a['kind']}={a['tokens_saved']}" for a in report.get("actions", [])) or "none",
    }
    if not report.get("exact_count") and report.get("calibration_factor"):
        out["calibration"] = f"{report.get('calibration_factor')};{report.get('calibration_source', 'static')}"
    if report.get("cut"):
        # equal on two turns of one conversation: the later prompt starts with the earlier one
        out["cut"] = str(report["cut"])
    if report.get("cache_temperature"):
        # cold: idle past the provider's cache TTL (a cut then costs nothing extra); anchored: the
        # cut is carried from the turn it was anchored on (see guard.fit.temperature)
        out["cache-temperature"] = str(report["cache_temperature"]) + (";anchored" if report.get("anchor") else "")
    if any(s.get("kind") == "replay" for s in report.get("skipped", [])):
        # a busy worker cut it as a cold cache's (anchored) instead of replaying its past turns
        out["busy"] = "replay_skipped"
    if report.get("other_context_managers"):
        out["coexisting"] = ",".join(report["other_context_managers"])
    if report.get("unseen_state"):
        # the provider adds input the guard cannot see (previous_response_id, ...): counts are lower bounds
        out["unseen-state"] = ",".join(report["unseen_state"])
    summary = report.get("summary")
    if isinstance(summary, Mapping):
        out["summary"] = f"{summary.get('source')};calls={summary.get('calls')}"
    reasoning = report.get("reasoning")
    if reasoning:
        out["reasoning"] = ";".join(f"{r['field']}={r['before']}->{r['after']}" for r in reasoning)
    if report.get("models_tried"):
        out["models-tried"] = ",".join(report["models_tried"])
    layers = report.get("policy_layers")
    if layers:
        out["policy"] = ",".join(layers)
    return {HEADER_PREFIX + k: v for k, v in out.items()}


_GUARDED_ALTERNATIVE = {
    "completion": "guard.completion(...) or guard.instrument() (sync litellm.completion has no hook to rewrite it)",
    "text_completion": "chat completions (the legacy text completion is not fitted)",
    "atext_completion": "chat completions (the legacy text completion is not fitted)",
    "pass_through_endpoint": "/chat/completions, /v1/messages or /v1/responses (a pass-through forwards it as is)",
}
_warned: set[str] = set()


def unguarded(call_type: str, *, where: str = "the provider call", refused: bool = False) -> None:
    """A prompt the guard did not fit: counted, and logged once per call type with what to do."""
    UNGUARDED.labels(call_type).inc()
    if call_type in _warned:
        return
    _warned.add(call_type)
    alternative = _GUARDED_ALTERNATIVE.get(call_type, "litellm.acompletion, the Router's async methods or the proxy")
    log.warning(
        "context-guard: a %s request reached %s without being fitted; %s. Use %s, or set the model's "
        "policy on_unguarded: refuse to refuse such requests where the guard sees them. Counted in "
        "context_guard_unguarded_calls_total.",
        call_type,
        where,
        "refused (on_unguarded: refuse)" if refused else "forwarded unchanged",
        alternative,
    )


def _tokens(obj: Any, name: str) -> int:
    """A positive token count in a usage object (a dict or LiteLLM's Usage), else 0."""
    value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def provider_input(usage: Any) -> int:
    """The input tokens a provider reported, cached ones included (LiteLLM normalizes usage:
    OpenAI's `prompt_tokens` counts cached input; for Anthropic it adds `cache_read_input_tokens`
    and `cache_creation_input_tokens` to `input_tokens`; the Responses API's `input_tokens`
    already includes its cached part)."""
    if usage is None:
        return 0
    # Anthropic's own shape, if a route hands it over untranslated: the three parts add up
    return _tokens(usage, "prompt_tokens") or (
        _tokens(usage, "input_tokens")
        + _tokens(usage, "cache_read_input_tokens")
        + _tokens(usage, "cache_creation_input_tokens")
    )


def count_ratio(model: str, provider: int, guard: int) -> float | None:
    """provider / guard input tokens of one answer, observed in `context_guard_count_ratio`."""
    if provider <= 0 or guard <= 0:
        return None
    ratio = provider / guard
    COUNT_RATIO.labels(model).observe(ratio)
    return ratio


def prompt_cache(model: str, usage: Any) -> dict[str, int] | None:
    """Count a provider answer's input tokens by cache status: read (cached input), write (cache
    creation, Anthropic) and uncached. LiteLLM normalizes usage: `prompt_tokens` includes both, and
    `prompt_tokens_details.cached_tokens` / `cache_read_input_tokens` are the reads; the Responses
    API's `input_tokens` includes cached input, read in `input_tokens_details.cached_tokens`."""
    if usage is None:
        return None
    prompt = provider_input(usage)
    details = None
    for name in ("prompt_tokens_details", "input_tokens_details"):  # chat; Responses API
        details = details or (usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None))
    read = _tokens(usage, "cache_read_input_tokens") or (
        _tokens(details, "cached_tokens") if details is not None else 0
    )
    write = _tokens(usage, "cache_creation_input_tokens")
    if not prompt:
        return None
    split = {"read": read, "write": write, "uncached": max(0, prompt - read - write)}
    for kind, n in split.items():
        if n:
            PROMPT_CACHE.labels(model, kind).inc(n)
    return split


def fallback(model: str, to: str, reason: str) -> None:
    FALLBACKS.labels(model, to, reason).inc()


def observe(report: Mapping[str, Any], route: str, seconds: float, *, first_pass: bool = True) -> None:
    """Metrics of one pass, from that pass's own report. The proxy runs the guard twice per
    request (before routing and per deployment attempt): the request is counted once (`first_pass`:
    the caller's decision, once per call id; a refusal only when it is final, not when a fallback
    takes over), and no pass counts the savings or summary of an earlier one."""
    model = str(report.get("model"))
    outcome = str(report.get("outcome"))
    if first_pass:
        REQUESTS.labels(model, outcome).inc()
        if outcome == "rejected":
            REJECTIONS.labels(model).inc()
        if report.get("cache_temperature"):
            CACHE_TEMPERATURE.labels(
                model, str(report["cache_temperature"]), str(bool(report.get("anchor"))).lower()
            ).inc()
    for action in report.get("actions", []):
        TOKENS_SAVED.labels(model, action["kind"]).inc(action["tokens_saved"])
    summary = report.get("summary")
    if isinstance(summary, Mapping):
        skipped = [s["reason"] for s in report.get("skipped", []) if s.get("kind") == "summarize"]
        SUMMARIES.labels(skipped[0] if skipped else str(summary.get("source"))).inc()
    LATENCY.labels(route).observe(seconds)
    log.info(
        "context-guard %s model=%s tokens %s->%s max_tokens=%s actions=%s",
        outcome,
        model,
        report.get("input_tokens_before"),
        report.get("input_tokens_after"),
        report.get("max_tokens"),
        ",".join(a["kind"] for a in report.get("actions", [])) or "none",
    )


def counting_miss(report: Mapping[str, Any]) -> None:
    """The provider refused as too long a request the guard counted as fitting: its count (or the
    model's limits) were low. Counted, and logged with the numbers the guard used, for calibration."""
    model = str(report.get("model"))
    COUNTING_MISSES.labels(model).inc()
    log.warning(
        "context-guard counting miss: the provider refused model=%s as too long; the guard counted "
        "input=%s + max_tokens=%s + margin=%s <= window=%s (exact_count=%s, calibration=%s)",
        model,
        report.get("input_tokens_after"),
        report.get("max_tokens"),
        report.get("safety_margin_tokens"),
        report.get("context_window"),
        report.get("exact_count"),
        report.get("calibration_factor"),
    )
