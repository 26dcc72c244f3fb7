"""Driving the planner generator on the event loop: its summary requests answered by the
summarizer (awaited), its CPU work in a worker thread for heavy fits, their turns taken from
`guard.shell.heavy_fits`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, cast

from guard.fit.planner import CachedSummaries, Fitted, Plan, WithheldSummary
from guard.shell.heavy_fits import HeavyFits
from guard.shell.summarizer import Summarizer, withhold


async def off_loop(heavy: HeavyFits | None, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`: on the event loop for a small body (`heavy` None), else in a worker thread in a
    turn of `heavy`'s (one that waited past `wait_seconds` for it: at once, outside the turns)."""
    if heavy is None:
        return fn(*args)
    if await heavy.turn(time.monotonic() + heavy.settings.wait_seconds):
        return await in_turn(heavy, fn, *args)
    return await asyncio.to_thread(fn, *args)


async def in_turn(heavy: HeavyFits, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a worker thread, in the turn of `heavy`'s the caller took: given back when the
    thread ends, also where the request awaiting it is cancelled first (a client gone: the thread
    runs on, and the bound on fits working at once holds)."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args))

    def give_back(task: asyncio.Future[Any]) -> None:
        heavy.done()
        if not task.cancelled():
            task.exception()  # (retrieved: a request gone leaves no "never retrieved" warning)

    work.add_done_callback(give_back)
    return await asyncio.shield(work)


async def drive(
    make: Callable[[bool], Plan], summarizer: Summarizer | None, tenant: str, *, heavy: HeavyFits | None
) -> Fitted:
    """Make and run the planner generator; its summary requests are answered by the summarizer
    (awaited on the event loop). A heavy fit (`heavy` given) runs its CPU work in a worker thread,
    one hop per step (the plan is made in the first), each step in a turn of `heavy`'s; one that
    waited past `wait_seconds` for its first turn is made hurried (`make(True)`: the deterministic
    path, see `HeavyFitSettings`) and runs at once, outside the turns."""
    plans: list[Plan] = []
    hurried = False
    if heavy is not None:
        hurried = not await heavy.turn(time.monotonic() + heavy.settings.wait_seconds)

    def step(answer: Any) -> tuple[bool, Any]:
        if not plans:
            plans.append(make(hurried))
        return _step(plans[0], answer)

    answer: Any = None
    first = True
    while True:
        if heavy is None:
            done, value = step(answer)
        elif hurried:
            done, value = await asyncio.to_thread(step, answer)
        else:
            if not first:
                await heavy.turn()
            done, value = await in_turn(heavy, step, answer)
        first = False
        if done:
            return cast("Fitted", value)
        if summarizer is None or hurried:
            answer = None
        elif isinstance(value, WithheldSummary):  # (before its base class: a lookup)
            await withhold(summarizer, value.requests[0], tenant)
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
