"""The guard's record of a request in LiteLLM's request metadata: stored per pass, merged into one
report per request, found again by the logging hooks and on responses, noted in spend logs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from guard.core.identity import STATE_KEY
from guard.core.memo import bounded_put
from guard.state import telemetry

CLIENT_POLICY_KEY = "context_guard_policy"  # a client's hints: may only tighten
REPORTS: dict[str, Mapping[str, Any]] = {}  # litellm_call_id -> the report of its latest pass
_COUNTED: dict[str, None] = {}  # call ids whose request was counted in the metrics
BOUND = 8192


def report_of(response: Any) -> Mapping[str, Any] | None:
    """The guard's report of the request that produced `response` (a LiteLLM response from
    `acompletion`, `aresponses`, the Router or the sync wrappers), or None if the guard did not see it."""
    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, Mapping):
        return None
    report = hidden.get(STATE_KEY)
    if isinstance(report, Mapping):
        return report
    call = call_id(hidden)
    return REPORTS.get(call) if call is not None else None


def attach(response: Any, report: Mapping[str, Any] | None) -> Any:
    """Put the report on a response, where `report_of` finds it."""
    hidden = getattr(response, "_hidden_params", None)
    if report is not None and isinstance(hidden, dict):
        hidden[STATE_KEY] = report
    return response


def call_id(data: Mapping[str, Any]) -> str | None:
    """The request's `litellm_call_id` (the key of its report across passes), if it has one."""
    call = data.get("litellm_call_id")
    return call if isinstance(call, str) else None


def once_key(data: Mapping[str, Any]) -> str:
    """What an event about a call (a provider failure, an unguarded prompt) is counted once per: the
    call's `litellm_call_id`, else the identity of its dict."""
    return str(data.get("litellm_call_id") or id(data))


def latest(data: Any) -> Mapping[str, Any] | None:
    """The report of a request's latest pass (after a fallback, the attempt that served it), else
    the one in the proxy's own copy of its metadata."""
    if not isinstance(data, dict):
        return None
    call = call_id(data)
    report = REPORTS.get(call) if call is not None else None
    return report if report is not None else report_in(data)


def first_count(call: str | None, default: bool = True) -> bool:
    """Whether this pass should count the request in the metrics: once per call id."""
    if call is None:
        return default
    if call in _COUNTED:
        return False
    bounded_put(_COUNTED, call, None, BOUND)
    return True


def metadata_places(kwargs: Mapping[str, Any]) -> list[Any]:
    """Everywhere LiteLLM keeps a logging event's request metadata."""
    params = kwargs.get("litellm_params")
    places = [kwargs.get("metadata"), kwargs.get("litellm_metadata")]
    if isinstance(params, Mapping):
        places += [params.get("metadata"), params.get("litellm_metadata")]
    return places


def report_in(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The guard's report in a logging event's kwargs (wherever LiteLLM keeps the metadata)."""
    for md in metadata_places(kwargs):
        if isinstance(md, Mapping) and isinstance(md.get(STATE_KEY), Mapping) and "outcome" in md[STATE_KEY]:
            return cast("Mapping[str, Any] | None", md[STATE_KEY])
    return None


def note_in_spend_logs(kwargs: Mapping[str, Any], notes: dict[str, Any]) -> None:
    """What the provider's answer told (cache usage, its count against the guard's) into the
    spend-logs record of the guard, wherever the logging metadata carries it (LiteLLM's standard
    logging payload included, for the loggers after us)."""
    places = metadata_places(kwargs)
    slo = kwargs.get("standard_logging_object")
    if isinstance(slo, Mapping):
        places.append(slo.get("metadata"))
    for md in places:
        spend = md.get("spend_logs_metadata") if isinstance(md, Mapping) else None
        record = spend.get(STATE_KEY) if isinstance(spend, Mapping) else None
        if isinstance(record, dict):
            record.update(notes)


def store(
    data: dict[str, Any], md_key: str, md: dict[str, Any], report: dict[str, Any], call: str | None = None
) -> None:
    if call is not None:
        bounded_put(REPORTS, call, report, BOUND)
    spend = md.get("spend_logs_metadata")
    md[STATE_KEY] = report
    md["spend_logs_metadata"] = {**(spend if isinstance(spend, Mapping) else {}), STATE_KEY: telemetry.summary(report)}
    data[md_key] = md


def merge(previous: Any, report: dict[str, Any], layers: list[str]) -> dict[str, Any]:
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
