"""The OpenAI Responses API through a real LiteLLM proxy, driven by the OpenAI and Anthropic SDKs:
`/v1/responses` to a deployment that speaks it (streaming and not), `/v1/messages` to an `openai/`
model (LiteLLM bridges it to the provider's `/v1/responses`) and `/v1/responses` to a chat-only
deployment (LiteLLM bridges it to `/chat/completions`). The upstream counts `input` items with its
own tokenizer and refuses what OpenAI refuses: input over the window, an output without its call, a
reasoning item without the item after it."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from bench.traces import agent_trace, to_anthropic, to_responses

CANARY = "zqxcanary"
WINDOW = 8192


def client(proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=120)


def chat_body(turns: int = 40) -> dict[str, Any]:
    body = agent_trace(turns=turns, seed=turns, scale=0.05)
    body["messages"][1]["content"] += f" {CANARY}"
    body["messages"].append({"role": "user", "content": f"So what broke? {CANARY}"})
    body.pop("tools")
    return body


def responses_body(turns: int = 40, reasoning: bool = True) -> dict[str, Any]:
    return to_responses(chat_body(turns), model="small", reasoning=reasoning)


def only_upstream(proxy) -> dict[str, Any]:
    received = proxy.received
    assert len(received) == 1, [r["path"] for r in received]
    return received[0]


def _user_texts(items: list[dict[str, Any]]) -> list[str]:
    return [
        json.dumps(i, sort_keys=True)
        for i in items
        if i.get("type", "message") == "message" and i.get("role") == "user"
    ]


def assert_items_intact(original: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    """The first and last user turns verbatim; every reasoning item sent unedited and followed by
    the item that followed it; every call with its output (the upstream refuses otherwise too)."""
    users = _user_texts(original)
    assert _user_texts(sent)[0] == users[0] and _user_texts(sent)[-1] == users[-1]
    key = lambda item: json.dumps(item, sort_keys=True)  # noqa: E731 - LiteLLM re-serializes items (key order)
    where = {key(item): k for k, item in enumerate(original)}
    for k, item in enumerate(sent):
        if item.get("type") == "reasoning":
            assert key(item) in where, "a reasoning item was edited"
            nxt = original[where[key(item)] + 1]
            assert sent[k + 1] == nxt, "a reasoning item lost the item it preceded"
    calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
    assert calls == outputs


def test_an_overflowing_responses_request_arrives_fitted_with_its_output_limit(proxy):
    proxy.reset()
    body = responses_body()
    resp = client(proxy).responses.with_raw_response.create(
        model="small", input=body["input"], instructions=body["instructions"]
    )
    assert resp.http_response.status_code == 200
    assert resp.parse().output_text.startswith("ok:")
    got = only_upstream(proxy)
    assert got["path"].endswith("/responses")
    sent = got["body"]
    assert sent["max_output_tokens"] == 512  # the policy default, written explicitly
    assert got["input_tokens"] + sent["max_output_tokens"] <= got["window"] == WINDOW
    assert sent["instructions"] == body["instructions"]
    assert len(sent["input"]) < len(body["input"])
    assert_items_intact(body["input"], sent["input"])
    headers = resp.http_response.headers
    assert headers["x-context-guard-outcome"] == "fitted"
    assert int(headers["x-context-guard-tokens-before"]) > WINDOW > int(headers["x-context-guard-tokens-after"])
    assert all(CANARY not in v for v in headers.values())


def test_a_computer_use_loop_with_screenshots_is_forwarded_whole(proxy):
    """Screenshots sent back as `computer_call_output` items cost an image's tokens, not their
    base64's: three of them (each ~45k tokens as text) were refused in an 8k window."""
    import base64
    import io
    import random

    from PIL import Image

    rng = random.Random(7)
    buf = io.BytesIO()
    Image.frombytes("RGB", (128, 128), bytes(rng.randrange(256) for _ in range(128 * 128 * 3))).save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    items: list[dict[str, Any]] = [{"role": "user", "content": "Open the settings page."}]
    for i in range(3):
        items += [
            {
                "type": "computer_call",
                "call_id": f"call_{i}",
                "id": f"cu_{i}",
                "action": {"type": "screenshot"},
                "pending_safety_checks": [],
                "status": "completed",
            },
            {
                "type": "computer_call_output",
                "call_id": f"call_{i}",
                "output": {"type": "computer_screenshot", "image_url": url},
            },
        ]
    proxy.reset()
    resp = client(proxy).responses.with_raw_response.create(model="small", input=items, max_output_tokens=256)
    assert resp.http_response.status_code == 200
    assert resp.http_response.headers["x-context-guard-outcome"] == "unchanged"
    sent = only_upstream(proxy)["body"]["input"]
    assert [i.get("type") for i in sent] == [i.get("type") for i in items]


def test_a_streamed_responses_request_is_fitted_too(proxy):
    proxy.reset()
    body = responses_body(turns=36)
    stream = client(proxy).responses.create(
        model="small", input=body["input"], instructions=body["instructions"], max_output_tokens=300, stream=True
    )
    events = [event.type for event in stream]
    assert events[-1] == "response.completed" and "response.output_text.delta" in events
    got = only_upstream(proxy)
    assert got["body"]["stream"] is True and got["body"]["max_output_tokens"] == 300
    assert got["input_tokens"] + 300 <= WINDOW
    assert_items_intact(body["input"], got["body"]["input"])


def test_a_hopeless_responses_request_is_refused_before_the_provider(proxy):
    proxy.reset()
    with pytest.raises(openai.BadRequestError) as caught:
        client(proxy).responses.create(model="small", input=f"{CANARY} " + "lorem ipsum dolor " * 6000)
    err = caught.value
    assert err.status_code == 400
    assert err.code == "context_length_exceeded" and err.param == "input"
    assert "8192" in err.message and CANARY not in err.message
    assert proxy.received == []  # refused before the upstream


def test_state_held_by_the_provider_is_reported(proxy):
    first = client(proxy).responses.create(model="small", input="what failed?")
    proxy.reset()
    resp = client(proxy).responses.with_raw_response.create(
        model="small", input=[{"role": "user", "content": "and then?"}], previous_response_id=first.id
    )
    assert resp.http_response.status_code == 200
    assert resp.http_response.headers["x-context-guard-unseen-state"] == "previous_response_id"
    assert only_upstream(proxy)["body"]["previous_response_id"]  # the provider's own id of the first answer


def test_messages_to_an_openai_model_arrive_at_its_responses_endpoint_fitted(proxy):
    """LiteLLM sends an Anthropic-SDK /v1/messages request for an `openai/` model to the
    provider's /v1/responses: the guard fits it there too (its deployment hook runs on the
    bridged body as `aresponses`), with max_output_tokens explicit."""
    proxy.reset()
    body = to_anthropic(chat_body(), model="small")
    c = anthropic.Anthropic(base_url=proxy.url, api_key="sk-master", max_retries=0, timeout=120)
    msg = c.messages.create(model="small", system=body["system"], messages=body["messages"], max_tokens=300)
    assert msg.content[0].text.startswith("ok")
    got = only_upstream(proxy)
    assert got["path"].endswith("/responses")
    assert got["body"]["max_output_tokens"] == 300
    assert got["input_tokens"] + 300 <= WINDOW
    sent = got["body"]["input"]
    calls = {i["call_id"] for i in sent if i.get("type") == "function_call"}
    assert calls == {i["call_id"] for i in sent if i.get("type") == "function_call_output"}


def test_responses_to_a_chat_only_deployment_arrive_fitted(proxy):
    """`use_chat_completions_api`: LiteLLM turns the Responses request into a chat completion;
    the guard fits the body the provider receives, with max_tokens explicit."""
    proxy.reset()
    body = responses_body(reasoning=False)
    resp = client(proxy).responses.create(
        model="small-chat-only", input=body["input"], instructions=body["instructions"]
    )
    assert resp.output_text.startswith("ok:")
    got = only_upstream(proxy)
    assert got["path"].endswith("/chat/completions")
    sent = got["body"]
    assert isinstance(sent.get("max_tokens") or sent.get("max_completion_tokens"), int)
    assert got["input_tokens"] + (sent.get("max_tokens") or sent.get("max_completion_tokens")) <= WINDOW
    assert sent["messages"][0] == {"role": "system", "content": body["instructions"]}


def test_a_responses_request_too_big_for_its_model_goes_to_the_context_window_fallback(proxy):
    """`tiny-with-fallback` (2k) falls back to `big` (32k): the guard hands the request over
    whole instead of cutting it for the small model, as on the other routes."""
    proxy.reset()
    body = responses_body(turns=24)
    resp = client(proxy).responses.with_raw_response.create(
        model="tiny-with-fallback", input=body["input"], instructions=body["instructions"]
    )
    assert resp.http_response.status_code == 200
    got = only_upstream(proxy)
    assert got["body"]["model"] == "gpt-4o-32k" and got["path"].endswith("/responses")
    assert got["body"]["input"] == body["input"] or json.dumps(got["body"]["input"], sort_keys=True) == json.dumps(
        body["input"], sort_keys=True
    )
    assert got["input_tokens"] + got["body"]["max_output_tokens"] <= 32768
