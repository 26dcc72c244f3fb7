"""The guard in SDK code: litellm.acompletion, litellm.completion (wrapper), Router (async, sync)."""

from __future__ import annotations

import asyncio
import copy

import litellm
import pytest

import guard
from bench.traces import agent_trace
from guard.shell.callback import ContextGuard

WINDOW = 8192


@pytest.fixture
def sdk(upstream):
    litellm.register_model(
        {
            "openai/gpt-4o-8k": {
                "max_input_tokens": WINDOW,
                "max_output_tokens": 2048,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )
    cb = ContextGuard(policies={"default_max_tokens": 256, "keep_recent_groups": 2})
    saved = list(litellm.callbacks)
    litellm.callbacks = [cb]
    with upstream.lock:
        upstream.requests.clear()
    yield f"http://127.0.0.1:{upstream.port}/v1"
    litellm.callbacks = saved


def conversation(turns: int = 40):
    body = agent_trace(turns=turns, seed=turns, scale=0.05)
    return body["messages"] + [{"role": "user", "content": "and now?"}]


def received(upstream):
    with upstream.lock:
        return list(upstream.requests)


def assert_fitted(upstream, max_tokens):
    got = received(upstream)
    assert len(got) == 1
    assert got[0]["body"]["max_tokens"] == max_tokens
    assert got[0]["input_tokens"] + max_tokens <= WINDOW


def test_acompletion_is_fitted_by_the_callback(sdk, upstream):
    msgs = conversation()
    before = copy.deepcopy(msgs)
    resp = asyncio.run(litellm.acompletion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs))
    assert resp.choices[0].message.content.startswith("ok")
    assert_fitted(upstream, 256)
    assert msgs == before  # the caller's list is untouched


def test_acompletion_hopeless_raises_context_window_error(sdk, upstream):
    with pytest.raises(litellm.ContextWindowExceededError) as err:
        asyncio.run(
            litellm.acompletion(
                model="openai/gpt-4o-8k",
                api_base=sdk,
                api_key="x",
                messages=[{"role": "user", "content": "data " * 20000}],
                max_tokens=10,
            )
        )
    assert "maximum context length is 8192" in str(err.value)
    assert received(upstream) == []


def test_sync_completion_needs_the_wrapper(sdk, upstream):
    msgs = conversation()
    with pytest.raises(litellm.ContextWindowExceededError):  # no hook on the sync path: the provider refuses
        litellm.completion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs, max_tokens=300)
    assert received(upstream)[0]["input_tokens"] > WINDOW
    with upstream.lock:
        upstream.requests.clear()
    resp = guard.completion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs, max_tokens=300)
    assert resp.choices[0].message.content.startswith("ok")
    assert_fitted(upstream, 300)


def _router(api_base: str) -> litellm.Router:
    return litellm.Router(
        model_list=[
            {
                "model_name": "small",
                "litellm_params": {"model": "openai/gpt-4o-8k", "api_base": api_base, "api_key": "x"},
                "model_info": {"max_input_tokens": WINDOW, "max_output_tokens": 2048},
            },
            {
                "model_name": "tiny",
                "litellm_params": {"model": "openai/gpt-4o-2k", "api_base": api_base, "api_key": "x"},
                "model_info": {"max_input_tokens": 2048, "max_output_tokens": 512},
            },
        ],
        context_window_fallbacks=[{"tiny": ["small"]}],
        num_retries=0,
    )


def test_router_acompletion_and_fallbacks(sdk, upstream):
    router = _router(sdk)
    asyncio.run(router.acompletion(model="small", messages=conversation()))
    assert_fitted(upstream, 256)
    with upstream.lock:
        upstream.requests.clear()
    question = [{"role": "user", "content": "review: " + "def f(x): return x * 2\n" * 300}]
    asyncio.run(router.acompletion(model="tiny", messages=question, max_tokens=100))
    assert [r["body"]["model"] for r in received(upstream)] == ["gpt-4o-8k"]


def test_router_sync_completion_through_wrap(sdk, upstream):
    router = _router(sdk)
    cb = litellm.callbacks[0]
    completion = cb.wrap(router.completion, router=router)
    resp = completion(model="small", messages=conversation(), max_tokens=400)
    assert resp.choices[0].message.content.startswith("ok")
    assert_fitted(upstream, 400)


# -- issue 14: routing, fallbacks, typed errors and reports, bypass warnings, instrumentation ------


def _mixed_router(api_base: str, **extra) -> litellm.Router:
    entry = lambda name, model, window: {  # noqa: E731
        "model_name": name,
        "litellm_params": {"model": f"openai/{model}", "api_base": api_base, "api_key": "x"},
        "model_info": {"max_input_tokens": window, "max_output_tokens": 4096},
    }
    return litellm.Router(
        model_list=[
            entry("mixed", "gpt-4o-16k", 16384),
            entry("mixed", "gpt-4o-131k", 131072),
            entry("small", "gpt-4o-16k", 16384),
            entry("big", "gpt-4o-131k", 131072),
        ],
        context_window_fallbacks=[{"small": ["big"]}],
        num_retries=0,
        **extra,
    )


def _trace() -> list[dict]:
    body = agent_trace(turns=60, seed=60, scale=0.3)
    return body["messages"] + [{"role": "user", "content": "so what broke?"}]


def _strip(m: dict) -> dict:
    return {k: v for k, v in m.items() if v is not None}


def test_async_router_serves_a_mixed_group_from_the_deployment_that_can_take_it(sdk, upstream):
    router = _mixed_router(sdk)
    big_question = [{"role": "user", "content": "review: " + "error at pool.py:42 timeout waiting\n" * 3000}]
    for _ in range(4):
        with upstream.lock:
            upstream.requests.clear()
        resp = asyncio.run(router.acompletion(model="mixed", messages=big_question, max_tokens=100))
        assert [r["body"]["model"] for r in received(upstream)] == ["gpt-4o-131k"]
        assert guard.report_of(resp)["context_window"] == 131072


def test_async_router_falls_back_before_cutting_and_reports_the_model_that_served(sdk, upstream):
    cb = litellm.callbacks[0]
    router = _mixed_router(sdk)
    cb.use_router(router)
    msgs = _trace()
    resp = asyncio.run(router.acompletion(model="small", messages=msgs, max_tokens=300))
    got = received(upstream)
    assert [r["body"]["model"] for r in got] == ["gpt-4o-131k"]
    assert [_strip(m) for m in got[0]["body"]["messages"]] == [_strip(m) for m in msgs]
    report = guard.report_of(resp)
    assert report["model"] == "big" and report["outcome"] == "unchanged"


def test_the_raised_error_is_the_guards_with_its_report(sdk, upstream):
    huge = [{"role": "user", "content": "data " * 200_000}]
    with pytest.raises(guard.ContextWindowExceeded) as err:
        asyncio.run(
            litellm.acompletion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=huge, max_tokens=10)
        )
    assert isinstance(err.value, litellm.ContextWindowExceededError)
    assert err.value.report.outcome == "rejected" and err.value.shortfall.limit == WINDOW
    router = _mixed_router(sdk)
    with pytest.raises(guard.ContextWindowExceeded) as err:
        asyncio.run(router.acompletion(model="big", messages=huge, max_tokens=10))
    assert err.value.report.context_window == 131072
    with pytest.raises(guard.ContextWindowExceeded) as err:
        guard.completion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=huge, max_tokens=10)
    assert err.value.report.model == "openai/gpt-4o-8k"
    assert received(upstream) == []


def test_an_unguarded_sync_call_is_logged_and_counted(sdk, upstream, caplog):
    from guard.state import telemetry

    before = telemetry.UNGUARDED.labels("completion")._value.get()
    telemetry._warned.discard("completion")
    msgs = [{"role": "user", "content": "hello"}]
    with caplog.at_level("WARNING", logger="context_guard"):
        litellm.completion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs)
        litellm.completion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs)
    assert telemetry.UNGUARDED.labels("completion")._value.get() == before + 2
    warnings = [r for r in caplog.records if "without being fitted" in r.getMessage()]
    assert len(warnings) == 1 and "guard.instrument()" in warnings[0].getMessage()
    assert "max_tokens" not in received(upstream)[0]["body"]  # what the bypass cost: no explicit output limit
    with upstream.lock:
        upstream.requests.clear()
    asyncio.run(litellm.acompletion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs))
    assert telemetry.UNGUARDED.labels("completion")._value.get() == before + 2  # a fitted call is not counted


def test_instrumentation_fits_sync_calls_and_sync_router_fallbacks_and_is_reversible(sdk, upstream):
    original = guard.shell.callback._litellm_completion  # LiteLLM's own
    assert litellm.completion is original
    router = _mixed_router(sdk)
    guard.instrument(router=router)
    guard.instrument(router=router)  # idempotent: wrapped once
    try:
        assert litellm.completion is not original
        msgs = conversation()
        resp = litellm.completion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=msgs, max_tokens=300)
        assert_fitted(upstream, 300)
        assert guard.report_of(resp)["outcome"] == "fitted"
        with upstream.lock:
            upstream.requests.clear()
        trace = _trace()
        resp = router.completion(model="small", messages=trace, max_tokens=300)
        got = received(upstream)
        assert [r["body"]["model"] for r in got] == ["gpt-4o-131k"]  # fell back whole, as the async Router does
        assert [_strip(m) for m in got[0]["body"]["messages"]] == [_strip(m) for m in trace]
        assert guard.report_of(resp)["model"] == "big"
    finally:
        guard.uninstrument()
    assert litellm.completion is original
    assert not guard.shell.callback.is_instrumented()


def test_sync_router_wrap_falls_back_like_the_async_router(sdk, upstream):
    cb = litellm.callbacks[0]
    router = _mixed_router(sdk)
    completion = cb.wrap(router.completion, router=router)
    trace = _trace()
    completion(model="small", messages=trace, max_tokens=300)
    assert [r["body"]["model"] for r in received(upstream)] == ["gpt-4o-131k"]
    assert litellm.completion is guard.shell.callback._litellm_completion  # patched only during the call


def test_sync_responses_are_fitted_by_the_hook_litellm_runs_for_them(sdk, upstream):
    """LiteLLM 1.106 runs the async deployment hook for sync `litellm.responses` too: fitted
    without the wrapper, and not counted as a bypass."""
    from guard.state import telemetry

    before = telemetry.UNGUARDED.labels("responses")._value.get()
    instructions, items = responses_input()
    resp = litellm.responses(
        model="openai/gpt-4o-8k", api_base=sdk, api_key="x", input=items, instructions=instructions
    )
    assert resp.output[0].content[0].text.startswith("ok")
    assert_responses_fitted(upstream, 256)
    assert telemetry.UNGUARDED.labels("responses")._value.get() == before


def test_router_thinking_under_a_model_cap_reaches_the_provider_valid(sdk, upstream):
    base = sdk.rsplit("/v1", 1)[0]
    # a test-only model: a Router registers its deployments' model_info in LiteLLM's global map
    litellm.register_model(
        {
            "anthropic/claude-cap": {
                "max_input_tokens": 200000,
                "max_output_tokens": 64000,
                "litellm_provider": "anthropic",
                "mode": "chat",
                "supports_reasoning": True,
            }
        }
    )
    router = litellm.Router(
        model_list=[
            {
                "model_name": "claude-cap",
                "litellm_params": {
                    "model": "anthropic/claude-cap",
                    "api_base": base,
                    "api_key": "x",
                },  # a test-only name: the Router registers its model_info globally
                "model_info": {"max_input_tokens": 200000, "max_output_tokens": 8192},
            }
        ],
        num_retries=0,
    )
    msgs = [{"role": "user", "content": "fix the failing test"}]
    resp = asyncio.run(
        router.acompletion(
            model="claude-cap", messages=msgs, max_tokens=32000, thinking={"type": "enabled", "budget_tokens": 31999}
        )
    )
    body = received(upstream)[-1]["body"]
    assert body["max_tokens"] == 8192 and body["thinking"]["budget_tokens"] == 8191
    assert guard.report_of(resp)["reasoning"] == [{"field": "thinking.budget_tokens", "before": 31999, "after": 8191}]


# -- the Responses API in SDK code ------------------------------------------------------------


def responses_input(turns: int = 40):
    from bench.traces import to_responses

    body = to_responses({"messages": conversation(turns)})
    return body["instructions"], body["input"]


def assert_responses_fitted(upstream, max_output_tokens):
    got = received(upstream)
    assert len(got) == 1 and got[0]["path"].endswith("/responses")
    assert got[0]["body"]["max_output_tokens"] == max_output_tokens
    assert got[0]["input_tokens"] + max_output_tokens <= WINDOW


def test_aresponses_is_fitted_by_the_callback(sdk, upstream):
    instructions, items = responses_input()
    before = copy.deepcopy(items)
    resp = asyncio.run(
        litellm.aresponses(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", input=items, instructions=instructions)
    )
    assert resp.output[0].content[0].text.startswith("ok")
    assert_responses_fitted(upstream, 256)
    assert items == before
    assert guard.report_of(resp)["dialect"] == "responses"


def test_aresponses_hopeless_raises_context_window_error(sdk, upstream):
    with pytest.raises(litellm.ContextWindowExceededError) as err:
        asyncio.run(litellm.aresponses(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", input="data " * 20000))
    assert "maximum context length is 8192" in str(err.value)
    assert received(upstream) == []


def test_router_aresponses_is_fitted(sdk, upstream):
    router = litellm.Router(
        model_list=[
            {
                "model_name": "agent",
                "litellm_params": {"model": "openai/gpt-4o-8k", "api_base": sdk, "api_key": "x"},
                "model_info": {"max_input_tokens": WINDOW, "max_output_tokens": 2048},
            }
        ]
    )
    instructions, items = responses_input()
    asyncio.run(router.aresponses(model="agent", input=items, instructions=instructions, max_output_tokens=300))
    assert_responses_fitted(upstream, 300)


def test_sync_responses_through_the_wrapper(sdk, upstream):
    instructions, items = responses_input()
    resp = guard.responses(
        model="openai/gpt-4o-8k",
        api_base=sdk,
        api_key="x",
        input=items,
        instructions=instructions,
        max_output_tokens=300,
    )
    assert resp.output[0].content[0].text.startswith("ok")
    assert_responses_fitted(upstream, 300)
    assert guard.report_of(resp)["outcome"] == "fitted"
