"""The guard in SDK code: litellm.acompletion, litellm.completion (wrapper), Router (async, sync)."""

from __future__ import annotations

import asyncio
import copy

import litellm
import pytest

import guard
from bench.traces import agent_trace
from guard.callback import ContextGuard

WINDOW = 8192


@pytest.fixture
def sdk(upstream):
    litellm.register_model({"openai/gpt-4o-8k": {"max_input_tokens": WINDOW, "max_output_tokens": 2048, "litellm_provider": "openai", "mode": "chat"}})
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
        asyncio.run(litellm.acompletion(model="openai/gpt-4o-8k", api_base=sdk, api_key="x", messages=[{"role": "user", "content": "data " * 20000}], max_tokens=10))
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
            {"model_name": "small", "litellm_params": {"model": "openai/gpt-4o-8k", "api_base": api_base, "api_key": "x"},
             "model_info": {"max_input_tokens": WINDOW, "max_output_tokens": 2048}},
            {"model_name": "tiny", "litellm_params": {"model": "openai/gpt-4o-2k", "api_base": api_base, "api_key": "x"},
             "model_info": {"max_input_tokens": 2048, "max_output_tokens": 512}},
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
