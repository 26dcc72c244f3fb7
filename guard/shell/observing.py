"""What the LiteLLM logging hooks learn after the provider answered (or failed): provider cache
usage and its count against the guard's (telemetry, spend logs, calibration) and counting misses
(prompts that reached a provider unfitted: guard.shell.unguarded). Telemetry never fails a request: every
function here logs an exception's type and returns.

Functions take the guard's services (guard.shell.services) whose calibration store and miss record they use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import litellm

from guard.core.memo import bounded_put
from guard.shell import records, unguarded
from guard.shell.summarizer import internal_call
from guard.state import telemetry

if TYPE_CHECKING:
    from guard.shell.services import Services


async def succeeded(cg: Services, kwargs: Any, response: Any) -> None:
    """What the provider's prompt cache did for a guarded request (streaming included: LiteLLM
    logs the assembled response), and its input count against the guard's, from its usage."""
    try:
        if internal_call.get(False) or not isinstance(kwargs, Mapping):
            return
        report = records.report_in(kwargs)
        if report is None:
            unguarded.reached(kwargs)  # a route served without the pre-API-call logging hook counts too
            return
        usage = getattr(response, "usage", None)
        if usage is None and isinstance(response, Mapping):
            usage = response.get("usage")
        split = telemetry.prompt_cache(str(report.get("model")), usage)
        notes: dict[str, Any] = {}
        if split:
            notes["prompt_cache"] = split
        ratio = telemetry.count_ratio(
            str(report.get("model")), telemetry.provider_input(usage), int(report.get("input_tokens_after") or 0)
        )
        if ratio is not None:
            notes["count_ratio"] = round(ratio, 4)
            await _learn(cg, report, ratio)
        if notes:
            if isinstance(report, dict):
                report.update(notes)  # the report kept for this call (`report_of`) too
            records.note_in_spend_logs(kwargs, notes)
    except Exception as e:  # telemetry must never fail a request
        telemetry.log.error("context-guard success hook: %s", type(e).__name__)


def _calibrated(report: Mapping[str, Any] | None) -> tuple[str, float] | None:
    """The deployment key and factor a request was counted with, if its count was an estimate
    (exact counts have nothing to learn)."""
    if report is None or report.get("exact_count"):
        return None
    key, factor = report.get("calibration_key"), report.get("calibration_factor")
    if not isinstance(key, str) or not isinstance(factor, (int, float)):
        return None
    return key, float(factor)


async def _learn(cg: Services, report: Mapping[str, Any], ratio: float) -> None:
    """One provider answer into the deployment's calibration record: the ratio to the guard's
    raw (unscaled) count. Only for estimated counts, and only from the provider's usage."""
    counted = _calibrated(report)
    if counted is None or report.get("outcome") == "rejected":
        return
    key, factor = counted
    await cg.calibrations.observe(key, ratio * factor)


async def failed_async(cg: Services, kwargs: Any) -> None:
    """A counting miss also raises the deployment's learned factor (see `failed`)."""
    counted = _calibrated(failed(cg, kwargs))
    if counted is not None:
        try:
            await cg.calibrations.miss(*counted)
        except Exception as e:  # telemetry must never fail a request
            telemetry.log.error("context-guard calibration miss: %s", type(e).__name__)


def failed(cg: Services, kwargs: Any) -> Mapping[str, Any] | None:
    """A provider call failed. A context-window error on a request the guard counted as
    fitting is a counting miss: counted once per call, logged with numbers only. Returns the
    report of a counting miss."""
    try:
        if not isinstance(kwargs, Mapping) or not isinstance(
            kwargs.get("exception"), litellm.ContextWindowExceededError
        ):
            return None
        report = records.report_in(kwargs)
        if report is None or report.get("outcome") not in ("fitted", "unchanged"):
            return None  # not checked by the guard, or let through on purpose (context_window_fallbacks)
        call = records.once_key(kwargs)
        if call in cg.misses:
            return None
        bounded_put(cg.misses, call, None, 4096)
        telemetry.counting_miss(report)
        return report
    except Exception as e:  # telemetry must never fail a request
        telemetry.log.error("context-guard failure hook: %s", type(e).__name__)
        return None
