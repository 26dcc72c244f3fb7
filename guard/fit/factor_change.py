"""A carried cut across a change of the calibration factor.

A deployment counted with a stand-in encoding changes its factor while it serves: with
`calibration_mode: auto` whenever its providers' answers move the learned quantile, and in either
mode after a counting miss. Every count moves with it, and with them where a prefix fit of the same
mark stops: a cut made again with the new factor is another cut, and the provider's cached prefix
breaks on a turn where the cut still fits (bench.cache's loops with a learned factor that changes
every few turns: session 69, docs/benchmarks.md).

So the conversation's record and its anchor keep the factor their cut was counted with
(`LastCut.factor`, `Anchor.factor`), and a request whose record was counted with another factor is
first planned with that factor's counter (`carrying`), its fit checked against a room that holds
whatever today's counts fit (`Resolved.checked_room`): where that plan carries the recorded cut, and
the body it sends fits the room counted with the factor in use now, it is sent, byte for byte as
before, and reported in today's counts. Otherwise (a cut that no longer fits, a record of another
history, a summary to make) the request is planned with today's factor, as any other."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import replace
from typing import Any

from guard.core.counters import Counters
from guard.core.errors import ContextWindowExceeded
from guard.core.steps import CLAMP
from guard.fit.planner import Fitted, Plan, plan
from guard.fit.request import Resolved
from guard.fit.spans import CachedSummaries
from guard.fit.temperature import Temperature


def counted_then(
    counters: Counters, resolved: Resolved, temperature: Temperature | None, messages: int
) -> Resolved | None:
    """`resolved` with the counter of the factor the conversation's record of the cut a request of
    `messages` messages carries (`Temperature.cut_for`; else its anchor) was counted with, where that
    is another than the one in use (None: the same, none recorded, or a cold cache)."""
    factor = 0.0
    if temperature is not None and temperature.state != "cold":  # (a cold cache's cut is made anew)
        last, anchor = temperature.cut_for(messages), temperature.anchor
        factor = last.factor if last is not None and last.factor else anchor.factor if anchor is not None else 0.0
    if not factor or factor == resolved.counter.factor:
        return None
    return replace(resolved, counter=counters.like(resolved.counter, factor), today_factor=resolved.counter.factor)


def carrying(
    body: Mapping[str, Any],
    resolved: Resolved,
    then: Resolved | None,
    *,
    can_summarize: bool = False,
    temperature: Temperature,
    replay: bool = True,
) -> Plan:
    """The plan of `body` under `resolved`; where its conversation's record was counted with
    another factor, `then`'s counter's (`counted_then`), the recorded cut as it was made if it
    still fits (see the module)."""
    if then is not None and _of_this(body, then, temperature):
        tried = yield from _tried(plan(body, then, can_summarize=can_summarize, temperature=temperature, replay=replay))
        if tried is not None and _carries(tried, temperature, len(then.dialect.messages(body))):
            fitted = _recounted(tried, body, resolved)
            if fitted is not None:
                return fitted
    return (yield from plan(body, resolved, can_summarize=can_summarize, temperature=temperature, replay=replay))


def _of_this(body: Mapping[str, Any], then: Resolved, temperature: Temperature) -> bool:
    """Whether the record or the anchor counted with `then`'s factor is of this history, counted so."""
    dialect, factor = then.dialect, then.counter.factor
    messages = dialect.messages(body)
    counts = then.counter.messages(dialect, messages)
    last, anchor = temperature.cut_for(len(messages)), temperature.anchor
    if last is not None and last.factor == factor and last.of_this(dialect, messages, counts):
        return True
    return anchor is not None and anchor.factor == factor and anchor.of_this(counts)


def _tried(inner: Plan) -> Generator[Any, Any, Fitted | None]:
    """`inner`'s fit, its summary cache look-ups passed on to the driver; None where it asks for a
    summary to be made (a new cut: made with today's factor instead) or refuses the request."""
    try:
        request = next(inner)
        while True:
            if not isinstance(request, CachedSummaries):
                inner.close()
                return None
            request = inner.send((yield request))
    except StopIteration as stop:
        fitted: Fitted = stop.value
        return fitted
    except ContextWindowExceeded:
        return None


def _carries(fitted: Fitted, temperature: Temperature, messages: int) -> bool:
    """Whether the fit of a request of `messages` messages carried the recorded cut (the record's or
    the anchor's prefix and mark) without lowering the output."""
    report = fitted.report
    carried = report.carried
    if carried is None or any(a.kind == CLAMP for a in report.actions):
        return False
    last, anchor = temperature.cut_for(messages), temperature.anchor
    if last is not None and (carried["length"], carried["mark"]) == (last.length, last.mark):
        return True
    made = report.anchor
    return anchor is not None and made is not None and (made["length"], made["mark"]) == (anchor.length, anchor.mark)


def _recounted(fitted: Fitted, body: Mapping[str, Any], resolved: Resolved) -> Fitted | None:
    """The fit, its counts and factor today's (its steps' savings as the cut was made), where the
    body it sends fits the room counted so and the request as asked does not; else None."""
    dialect, counter, report = resolved.dialect, resolved.counter, fitted.report
    before, after = counter.body(dialect, body), counter.body(dialect, fitted.body)
    if before <= report.room or after > report.room:
        return None
    calibration = resolved.calibration
    return replace(
        fitted,
        report=replace(
            report,
            input_tokens_before=before,
            input_tokens_after=after,
            calibration_factor=counter.factor,
            calibration_source=calibration[1] if calibration else report.calibration_source,
            exact_count=resolved.exact,
        ),
    )
