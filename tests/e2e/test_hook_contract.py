"""Early warnings: what the guard relies on in LiteLLM's hook contract, checked on the installed
LiteLLM with a probe callback (tests/e2e/contract_probe.py) instead of the guard, so a failure
names the LiteLLM behaviour that changed rather than a guard outcome.

- The request dict a pre-call hook returns (proxy) and the kwargs a deployment hook edits and
  returns (proxy and SDK) are what LiteLLM sends. An execution path that copies the request before
  the hooks run (LiteLLM's planned Rust path, for one) would send the client's unfitted body.
- The deployment hook runs once per attempt, for the deployment of that attempt: the guard fits
  each fallback to its own window.
- The call type each route arrives with is one `guard.shell.routes` knows: a renamed call type would
  let that route through unguarded.

CI runs this module twice on every tested release: as is, and with `LITELLM_RUST=true`, the switch
that sends `/v1/messages` for Anthropic models through LiteLLM's Rust core where the release has one
(1.108 on). Under it the messages tests also assert that the Rust core served the call (its
`x-litellm-rust` header), so the contract is checked on the path a team that turns Rust on runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anthropic
import litellm
import openai
import pytest

from guard.shell import routes
from tests.e2e.contract_probe import DEPLOYMENT, FLAG, PRE_CALL, ContractProbe
from tests.e2e.rust_core import assert_served_by

pytestmark = pytest.mark.slow


def _changed(what: str) -> str:
    from importlib.metadata import version

    return f"LiteLLM {version('litellm')} changed its hook contract: {what}"


@pytest.fixture
def probe(upstream):
    p = ContractProbe()
    saved = list(litellm.callbacks)
    litellm.callbacks = [p]
    with upstream.lock:
        upstream.requests.clear()
    yield p
    litellm.callbacks = saved


def _sent(upstream) -> list[dict]:
    with upstream.lock:
        return [r["body"] for r in upstream.requests]


def _last_text(body: dict) -> str:
    turns = body.get("messages") or body.get("input") or []
    user = [t for t in turns if isinstance(t, dict) and t.get("role") == "user"]
    content = user[-1]["content"] if user else ""
    if isinstance(content, list):  # Responses input parts
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _route_of(call_type: str) -> str | None:
    route = routes.for_call(call_type)
    return None if route is None else route.name


# -- SDK: litellm.acompletion, aresponses, anthropic messages, Router fallbacks -----------------


def test_sdk_sends_the_kwargs_the_deployment_hook_returns(probe, upstream):
    base = f"http://127.0.0.1:{upstream.port}/v1"
    asyncio.run(
        litellm.acompletion(
            model="openai/gpt-4o-8k",
            api_base=base,
            api_key="x",
            max_tokens=16,
            messages=[{"role": "user", "content": f"{FLAG} chat"}],
        )
    )
    sent = _sent(upstream)
    assert len(sent) == 1
    assert _last_text(sent[0]).endswith(DEPLOYMENT), _changed(
        "litellm.acompletion no longer sends the kwargs async_pre_call_deployment_hook edits and returns; "
        "the guard's fitted messages would not reach the provider"
    )


def test_sdk_call_types_are_the_ones_the_guard_routes(probe, upstream):
    base = f"http://127.0.0.1:{upstream.port}"
    asyncio.run(
        litellm.acompletion(
            model="openai/gpt-4o-8k",
            api_base=f"{base}/v1",
            api_key="x",
            max_tokens=16,
            messages=[{"role": "user", "content": f"{FLAG} chat"}],
        )
    )
    asyncio.run(
        litellm.aresponses(
            model="openai/gpt-4o-8k",
            api_base=f"{base}/v1",
            api_key="x",
            max_output_tokens=16,
            input=[{"role": "user", "content": f"{FLAG} responses"}],
        )
    )
    answer = asyncio.run(
        litellm.anthropic.messages.acreate(
            model="anthropic/claude-8k",
            api_base=base,
            api_key="x",
            max_tokens=16,
            messages=[{"role": "user", "content": f"{FLAG} messages"}],
        )
    )
    assert_served_by(
        dict(answer).get("_hidden_params", {}).get("additional_headers"), "litellm.anthropic.messages.acreate"
    )
    seen = [(call["call_type"], _route_of(call["call_type"])) for call in probe.calls if call["hook"] == "deployment"]
    assert [route for _, route in seen] == ["chat", "responses", "messages"], _changed(
        f"the SDK's deployment hook now arrives with call types {[c for c, _ in seen]} for acompletion, "
        f"aresponses and anthropic messages; guard.shell.routes knows {sorted(routes._BY_CALL)}"
    )
    sent = _sent(upstream)
    assert len(sent) == 3 and all(_last_text(body).endswith(DEPLOYMENT) for body in sent), _changed(
        "a deployment hook's edits no longer reach the provider on every SDK route"
    )


def test_the_deployment_hook_runs_once_per_attempt_with_that_attempts_deployment(probe, upstream):
    base = f"http://127.0.0.1:{upstream.port}/v1"
    entry = lambda name, model, window: {  # noqa: E731
        "model_name": name,
        "litellm_params": {"model": f"openai/{model}", "api_base": base, "api_key": "x"},
        "model_info": {"max_input_tokens": window, "max_output_tokens": 512},
    }
    router = litellm.Router(
        model_list=[entry("tiny", "gpt-4o-2k", 2048), entry("small", "gpt-4o-8k", 8192)],
        context_window_fallbacks=[{"tiny": ["small"]}],
        num_retries=0,
    )
    # ~3k tokens: the 2k upstream refuses it (the probe cuts nothing), the fallback takes it
    text = f"{FLAG} fallback " + "def f(x): return x * 2\n" * 300
    asyncio.run(router.acompletion(model="tiny", max_tokens=16, messages=[{"role": "user", "content": text}]))
    attempts = [call["model"] for call in probe.calls if call["hook"] == "deployment"]
    assert attempts == ["openai/gpt-4o-2k", "openai/gpt-4o-8k"], _changed(
        f"the Router ran async_pre_call_deployment_hook for {attempts} on a context-window fallback "
        "from gpt-4o-2k to gpt-4o-8k; the guard fits each attempt to its own deployment's window"
    )
    sent = _sent(upstream)
    assert [body["model"] for body in sent] == ["gpt-4o-2k", "gpt-4o-8k"]
    assert all(_last_text(body).endswith(DEPLOYMENT) for body in sent), _changed(
        "a fallback attempt no longer sends what its deployment hook returned"
    )


# -- proxy: pre-call hook and deployment hook, each route -------------------------------------


def _contract_calls(proxy) -> list[dict]:
    path = Path(proxy.contract_log)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_proxy_sends_what_its_hooks_return_on_every_route(proxy):
    proxy.reset()
    Path(proxy.contract_log).write_text("")
    oa = openai.OpenAI(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=120)
    oa.chat.completions.create(model="small", max_tokens=16, messages=[{"role": "user", "content": f"{FLAG} chat"}])
    oa.responses.create(model="small", max_output_tokens=16, input=[{"role": "user", "content": f"{FLAG} responses"}])
    an = anthropic.Anthropic(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=120)
    raw = an.messages.with_raw_response.create(
        model="claude-small", max_tokens=16, messages=[{"role": "user", "content": f"{FLAG} messages"}]
    )
    assert_served_by(dict(raw.headers), "the proxy's /v1/messages")
    calls = _contract_calls(proxy)
    for hook in ("pre_call", "deployment"):
        types = [call["call_type"] for call in calls if call["hook"] == hook]
        assert [_route_of(t) for t in types] == ["chat", "responses", "messages"], _changed(
            f"the proxy's {hook} hook now arrives with call types {types} for /chat/completions, /v1/responses "
            f"and /v1/messages; guard.shell.routes knows {sorted(routes._BY_CALL)}"
        )
    sent = [body for body in _sent(proxy.upstream)]
    assert len(sent) == 3
    for body in sent:
        text = _last_text(body)
        assert PRE_CALL in text, _changed("the proxy no longer sends the request dict async_pre_call_hook returns")
        assert text.endswith(DEPLOYMENT), _changed(
            "the proxy no longer sends the kwargs async_pre_call_deployment_hook edits and returns"
        )
