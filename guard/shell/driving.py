"""Driving the planner generator on the event loop: its summary requests answered by the
summarizer (awaited), its CPU work in a worker thread for big bodies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from guard.fit.planner import CachedSummaries, Fitted, Plan
from guard.shell.summarizer import Summarizer


async def maybe_thread(threaded: bool, fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args) if threaded else fn(*args)


async def drive(make: Callable[[], Plan], summarizer: Summarizer | None, tenant: str, *, threaded: bool) -> Fitted:
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
            return cast("Fitted", value)
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
