"""Heavy fits on a busy worker (issue 36, item 3): long bodies are fitted off the event loop, a
bounded few at once; one that waits past `wait_seconds` for its turn goes the deterministic path
(no summarizer, no replay of its past turns: a cold cache's cut, anchored), never a lost request."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import litellm
import pytest
from litellm.proxy._types import UserAPIKeyAuth

from guard.core.config import Deployment, HeavyFitSettings, parse_config
from guard.core.errors import PolicyError
from guard.core.policy import load_policy_set
from guard.fit.engine import Engine, FitRequest
from guard.fit.planner import run as run_plan
from guard.shell.callback import STATE_KEY, ContextGuard
from guard.shell.driving import in_turn
from guard.shell.heavy_fits import HeavyFits
from guard.state import telemetry

WINDOW = 3000


def engine() -> Engine:
    deployments = {"m": Deployment("m", "gpt-4o", {"max_input_tokens": WINDOW, "max_output_tokens": 500})}
    return Engine(load_policy_set({"default_max_tokens": 200}), deployments=deployments, model_map=litellm.model_cost)


def loop(turns: int, task: str = "task") -> dict:
    """An agent loop's request after `turns` tool calls: 2 + 2 * turns messages, ~100 tokens a result."""
    msgs: list[dict] = [{"role": "system", "content": "sys"}, {"role": "user", "content": task}]
    for i in range(turns):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "run", "arguments": json.dumps({"i": i})}}
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " + "lorem ipsum " * 45})
    return {"model": "m", "messages": msgs}


def hurried() -> float:
    return sum(s.value for m in telemetry.HURRIED.collect() for s in m.samples if s.name.endswith("_total"))


def test_turns_are_bounded_and_a_wait_past_its_deadline_takes_none():
    async def go() -> list[object]:
        heavy = HeavyFits(HeavyFitSettings(concurrency=1))
        seen: list[object] = [await heavy.turn()]  # free: at once
        loop_ = asyncio.get_running_loop()
        seen.append(await heavy.turn(loop_.time() + 0.02))  # taken: the deadline passes first
        waiter = asyncio.ensure_future(heavy.turn())
        await asyncio.sleep(0.01)
        seen.append((waiter.done(), heavy.waiting))
        heavy.done()
        seen.append(await waiter)  # the turn given back goes to the one waiting
        heavy.done()
        unbounded = HeavyFits(HeavyFitSettings(concurrency=0))
        seen.append(all([await unbounded.turn(loop_.time()) for _ in range(5)]))
        return seen

    before = hurried()
    assert asyncio.run(go()) == [True, False, (False, 1), True, True]
    assert hurried() - before == 1


def test_a_request_cancelled_mid_fit_gives_its_turn_back_when_its_thread_ends():
    async def go() -> tuple[bool, bool]:
        heavy = HeavyFits(HeavyFitSettings(concurrency=1))
        release = threading.Event()
        assert await heavy.turn()
        fit = asyncio.ensure_future(in_turn(heavy, release.wait, 10))
        await asyncio.sleep(0.05)
        fit.cancel()  # the client went away; its fit's thread works on
        with pytest.raises(asyncio.CancelledError):
            await fit
        held = await heavy.turn(time.monotonic() + 0.05)
        release.set()
        free = await heavy.turn(time.monotonic() + 5)
        heavy.done()
        return held, free

    assert asyncio.run(go()) == (False, True)


def test_heavy_fits_settings_come_from_the_config_file_and_bad_ones_are_named():
    cfg = parse_config({"context_guard": {"heavy_fits": {"concurrency": 2, "wait_seconds": 0.5, "warm_chars": 0}}})
    assert cfg.heavy_fits == HeavyFitSettings(min_messages=64, concurrency=2, wait_seconds=0.5, warm_chars=0)
    assert parse_config({}).heavy_fits == HeavyFitSettings()
    with pytest.raises(PolicyError, match="concurrency"):
        parse_config({"context_guard": {"heavy_fits": {"concurrency": -1}}})
    with pytest.raises(PolicyError, match="warm_chars"):
        parse_config({"context_guard": {"heavy_fits": {"warm_chars": -1}}})


def test_a_fit_without_replay_is_a_cold_caches_cut_anchored_and_the_next_turn_carries_it():
    e = engine()
    body = loop(40)
    replayed = run_plan(engine().plan_for(FitRequest(body)), None).report
    fitted = run_plan(e.plan_for(FitRequest(body, replay=False)), None)
    report = fitted.report
    assert (
        report.fits
        and report.anchor is not None
        and {"kind": "replay", "reason": "busy"} in [{"kind": s.kind, "reason": s.reason} for s in report.skipped]
    )
    assert replayed.anchor is None and not any(s.kind == "replay" for s in replayed.skipped)
    # the next turns (replay allowed) carry the anchored cut while it fits: the prompt grows
    later = run_plan(e.plan_for(FitRequest(loop(41))), None)
    assert later.report.fits and later.report.anchor == report.anchor
    assert later.body["messages"][: len(fitted.body["messages"])] == fitted.body["messages"]


def _hook(g: ContextGuard, data: dict) -> dict:
    return g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion")


def test_a_heavy_fit_that_waits_past_its_deadline_goes_the_deterministic_path_and_is_served():
    g = ContextGuard(engine=engine(), heavy_fits={"concurrency": 1, "wait_seconds": 0.05})

    async def go() -> tuple[dict, dict, bool]:
        assert await g.heavy_fits.turn()  # another heavy fit holds the only turn
        busy = await _hook(g, loop(40, "first task"))
        g.heavy_fits.done()
        calm = await _hook(g, loop(40, "second task"))  # its turn is free: the replay
        small = loop(20, "third task")  # under min_messages: on the event loop, no turn needed
        assert await g.heavy_fits.turn()
        served = await _hook(g, small)
        g.heavy_fits.done()
        return busy, calm, served["metadata"][STATE_KEY]["fits"]

    before = hurried()
    busy, calm, small_fits = asyncio.run(go())
    report = busy["metadata"][STATE_KEY]
    assert report["fits"] and report["anchor"] is not None
    assert {"kind": "replay", "reason": "busy"} in report["skipped"]
    assert json.loads(json.dumps(busy["messages"]))  # a body LiteLLM can send
    calm_report = calm["metadata"][STATE_KEY]
    assert calm_report["fits"] and {"kind": "replay", "reason": "busy"} not in calm_report["skipped"]
    assert small_fits and hurried() - before == 1
    from guard.state.telemetry import headers

    assert headers(report)["x-context-guard-busy"] == "replay_skipped"
    assert "x-context-guard-busy" not in headers(calm_report)


def test_the_next_turns_of_a_long_conversation_this_worker_fitted_are_fitted_on_the_event_loop():
    """A long body goes to a thread; the next turns of its conversation on the same worker whose
    new messages fit the room its last body left free carry its cut and are fitted on the loop
    (they cost about the new messages); a turn that makes a new cut, a body the client shortened
    (edited), one grown by more than `warm_chars`, another conversation and every body with
    `warm_chars: 0` go to a thread."""

    def run(guard: ContextGuard, bodies: list[dict]) -> list[tuple[bool, str | None]]:
        seen: list[tuple[bool, str | None]] = []
        on_loop: list[bool] = []
        plan_for = guard.engine.plan_for

        def spy(request: FitRequest) -> object:
            on_loop.append(threading.current_thread() is threading.main_thread())
            return plan_for(request)

        guard.engine.plan_for = spy  # type: ignore[method-assign]

        async def go() -> None:
            for body in bodies:
                report = (await _hook(guard, body))["metadata"][STATE_KEY]
                assert report["fits"]
                seen.append((on_loop[-1], report["cut"]))

        asyncio.run(go())
        return seen

    turns = run(ContextGuard(engine=engine()), [loop(n) for n in range(40, 53)])
    assert not turns[0][0]
    # on the loop exactly where the turn carried the cut before it (new cuts: 2 of 12 turns)
    assert [on for on, _ in turns[1:]] == [cut == last for (_, last), (_, cut) in zip(turns, turns[1:])]
    assert 1 <= sum(not on for on, _ in turns[1:]) <= 3
    grown = loop(250)  # (200 calls and results of ~550 characters more than the body before it)
    bodies = [loop(40), loop(41), loop(35), grown, loop(44, "another task")]
    assert [on for on, _ in run(ContextGuard(engine=engine()), bodies)] == [False, True, False, False, False]
    never = ContextGuard(engine=engine(), heavy_fits={"warm_chars": 0})
    assert [on for on, _ in run(never, bodies[:2])] == [False, False]
