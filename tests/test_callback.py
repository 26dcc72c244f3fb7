"""The LiteLLM adapter in-process: hook order, report merging, failure policy, headers."""

from __future__ import annotations

import asyncio
import copy

import litellm
import pytest
from litellm.proxy._types import UserAPIKeyAuth

from guard.core.config import Deployment
from guard.core.policy import load_policy_set
from guard.fit.engine import Engine
from guard.shell.callback import STATE_KEY, ContextGuard, GuardFailed


def guard(model: str = "gpt-4o", **policy) -> ContextGuard:
    engine = Engine(
        load_policy_set(policy),
        deployments={"m": Deployment("m", model, {"max_input_tokens": 3000, "max_output_tokens": 500})},
        model_map=litellm.model_cost,
    )
    return ContextGuard(engine=engine)


def body(n: int = 30) -> dict:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    msgs += [{"role": "assistant", "content": f"step {i} " + "lorem ipsum " * 60} for i in range(n)]
    msgs.append({"role": "user", "content": "question"})
    return {"model": "m", "messages": msgs, "metadata": {"tags": ["x"]}}


def run(coro):
    return asyncio.run(coro)


def _sample(metric, **labels) -> float:
    return sum(
        s.value
        for m in metric.collect()
        for s in m.samples
        if s.name.endswith("_total") and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_proxy_then_deployment_hook_report_once():
    from guard.state import telemetry

    g = guard(default_max_tokens=200)
    data = body()
    saved_before = _sample(telemetry.TOKENS_SAVED)
    requests_before = _sample(telemetry.REQUESTS)
    first = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion"))
    report = first["metadata"][STATE_KEY]
    assert report["outcome"] == "fitted" and report["passes"] == 1
    kwargs = {**first, "model": "gpt-4o", "model_info": {"max_input_tokens": 3000, "max_output_tokens": 500}}
    second = run(g.async_pre_call_deployment_hook(kwargs, litellm.types.utils.CallTypes.acompletion))
    again = second["metadata"][STATE_KEY]
    assert again["passes"] == 2 and again["actions"] == report["actions"]  # nothing counted twice
    assert second["messages"] == first["messages"]
    # nor in the metrics: one request, its savings once
    assert _sample(telemetry.TOKENS_SAVED) - saved_before == sum(a["tokens_saved"] for a in report["actions"])
    assert _sample(telemetry.REQUESTS) - requests_before == 1
    assert data["metadata"] == {"tags": ["x"]}  # the caller's metadata dict was not touched


def _deployment_kwargs(first: dict, window: int = 3000) -> dict:
    """The deployment hook's kwargs as the proxy builds them from the first pass's body."""
    md = {**first["metadata"], "model_group": "m"}
    return {
        **first,
        "metadata": md,
        "model": "gpt-4o",
        "model_info": {"max_input_tokens": window, "max_output_tokens": 500},
    }


def _counting_fits(g: ContextGuard) -> list[int]:
    calls: list[int] = []
    plan_for = g.engine.plan_for

    def counted(request):
        calls.append(1)
        return plan_for(request)

    g.engine.plan_for = counted  # type: ignore[method-assign]
    return calls


def test_the_deployment_pass_over_the_first_pass_body_takes_its_answer():
    from guard.state import telemetry

    g = guard(default_max_tokens=200)
    fits = _counting_fits(g)
    data = {**body(), "litellm_call_id": "call-repeat-1"}
    requests_before = _sample(telemetry.REQUESTS)
    first = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion"))
    sent = copy.deepcopy(first["messages"])
    report = first["metadata"][STATE_KEY]
    assert report["outcome"] == "fitted" and len(fits) == 1
    second = run(g.async_pre_call_deployment_hook(_deployment_kwargs(first), litellm.types.utils.CallTypes.acompletion))
    again = second["metadata"][STATE_KEY]
    assert len(fits) == 1  # not fitted again: nothing it reads changed
    assert second["messages"] == sent and second["max_tokens"] == report["max_tokens"]
    assert again["passes"] == 2 and again["actions"] == report["actions"]
    assert again["input_tokens_after"] == report["input_tokens_after"]
    assert _sample(telemetry.REQUESTS) - requests_before == 1


def test_a_responses_request_takes_its_first_pass_answer_too():
    # /v1/responses: the deployment hook's kwargs carry the provider apart (custom_llm_provider), which
    # reaches the fit only through the deployment's limits, compared in the seal
    g = guard("openai/gpt-4o", default_max_tokens=200)
    fits = _counting_fits(g)
    items = [{"role": "user", "content": "task"}] + [
        {"role": "assistant", "content": f"step {i} " + "lorem ipsum " * 60} for i in range(30)
    ]
    data = {"model": "m", "input": items + [{"role": "user", "content": "question"}], "litellm_call_id": "call-r"}
    first = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "aresponses"))
    assert first["litellm_metadata"][STATE_KEY]["outcome"] == "fitted" and len(fits) == 1
    kwargs = {
        **first,
        "litellm_metadata": {**first["litellm_metadata"], "model_group": "m"},
        "model": "gpt-4o",
        "custom_llm_provider": "openai",
        "model_info": {"max_input_tokens": 3000, "max_output_tokens": 500},
    }
    second = run(g.async_pre_call_deployment_hook(kwargs, litellm.types.utils.CallTypes.aresponses))
    assert len(fits) == 1 and second["litellm_metadata"][STATE_KEY]["passes"] == 2


def test_a_body_edited_between_the_passes_is_fitted_again():
    g = guard(default_max_tokens=200)
    fits = _counting_fits(g)
    first = run(
        g.async_pre_call_hook(
            UserAPIKeyAuth(api_key="k"), None, {**body(), "litellm_call_id": "call-repeat-2"}, "acompletion"
        )
    )
    room = first["metadata"][STATE_KEY]["room"]
    # another callback grows the newest message in place (the same list, the same dict)
    first["messages"][-1]["content"] += " and more" * 400
    second = run(g.async_pre_call_deployment_hook(_deployment_kwargs(first), litellm.types.utils.CallTypes.acompletion))
    assert len(fits) == 2
    assert second["metadata"][STATE_KEY]["input_tokens_after"] <= room


@pytest.mark.parametrize("change", ["window", "policy", "call", "first pass"])
def test_a_pass_under_other_limits_policy_or_call_is_fitted_again(change):
    g = guard(default_max_tokens=200)
    fits = _counting_fits(g)
    data = {**body(), "litellm_call_id": "call-repeat-3-" + change}
    first = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion"))
    kwargs = _deployment_kwargs(first, window=1500 if change == "window" else 3000)
    if change == "policy":  # a client's hint (it may only tighten): another policy
        kwargs["metadata"]["context_guard_policy"] = {"safety_margin_tokens": 900}
    if change == "call":
        kwargs["litellm_call_id"] = "another-call"
    if change == "first pass":  # a new request under the same call id (a client's): its own first pass
        second = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, first, "acompletion"))
        assert second["metadata"][STATE_KEY]["passes"] == 1 and second["metadata"][STATE_KEY]["model"]
    else:
        second = run(g.async_pre_call_deployment_hook(kwargs, litellm.types.utils.CallTypes.acompletion))
    assert len(fits) == 2
    assert second["metadata"][STATE_KEY]["fits"]
    if change == "window":
        assert second["metadata"][STATE_KEY]["context_window"] == 1500  # cut again, to the smaller window


def test_a_client_cannot_plant_a_report():
    g = guard()
    data = body(2)
    data["metadata"][STATE_KEY] = {"outcome": "unchanged", "actions": [{"kind": "fake", "tokens_saved": 1}]}
    out = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion"))
    assert out["metadata"][STATE_KEY]["actions"] == [] and out["metadata"][STATE_KEY]["passes"] == 1


def test_guard_bugs_fail_open_or_closed_per_policy(monkeypatch):
    for on_error, expect_raise in (("open", False), ("closed", True)):
        g = guard(on_error=on_error)
        monkeypatch.setattr(g.engine, "plan_for", lambda *a, **k: 1 / 0)
        data = body(2)
        snapshot = copy.deepcopy(data)
        if expect_raise:
            with pytest.raises(GuardFailed, match="ZeroDivisionError"):
                run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion"))
        else:
            assert run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion")) == snapshot


def test_unknown_models_and_bad_bodies_are_clear_400s():
    g = guard()
    with pytest.raises(litellm.BadRequestError, match="no context window known"):
        run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, {"model": "nope", "messages": []}, "acompletion"))
    with pytest.raises(litellm.BadRequestError, match="messages\\[0\\]"):
        run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, {"model": "m", "messages": ["hi"]}, "acompletion"))


def test_other_call_types_pass_through():
    g = guard()
    data = {"model": "m", "input": "embed me"}
    assert run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "aembedding")) is data


def test_headers_hold_numbers_only():
    g = guard()
    out = run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, body(), "acompletion"))
    headers = run(g.async_post_call_response_headers_hook(out, UserAPIKeyAuth(api_key="k"), None))
    assert headers["x-context-guard-outcome"] == "fitted"
    assert int(headers["x-context-guard-tokens-after"]) < int(headers["x-context-guard-tokens-before"])
    assert not any("lorem" in v or "question" in v for v in headers.values())
    assert run(g.async_post_call_response_headers_hook({"metadata": {}}, UserAPIKeyAuth(api_key="k"), None)) is None


def test_team_metadata_from_the_key_record_applies():
    g = guard()
    auth = UserAPIKeyAuth(api_key="k", team_id="t1", team_metadata={STATE_KEY: {"max_output_tokens": 77}})
    out = run(
        g.async_pre_call_hook(
            auth, None, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "acompletion"
        )
    )
    assert out["max_tokens"] == 77 and out["metadata"][STATE_KEY]["policy_layers"] == ["metadata"]


def test_a_guard_failure_is_logged_without_request_text(monkeypatch, caplog):
    g = guard(on_error="open")

    def broken(request):
        raise ValueError("bad content: " + request.body["messages"][-1]["content"])

    monkeypatch.setattr(g.engine, "plan_for", broken)
    data = body(2)
    with caplog.at_level("DEBUG", logger="context_guard"):
        run(g.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, "acompletion"))
    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "ValueError" in logged and "question" not in logged


def test_counting_misses_are_counted_once_per_call_and_only_for_what_the_guard_let_through(caplog):
    from guard.state import telemetry

    g = guard()
    fitted = g.fit_kwargs(body())
    report = fitted["metadata"][STATE_KEY]
    assert report["outcome"] == "fitted"
    error = litellm.ContextWindowExceededError(message="too long", model="m", llm_provider="openai")
    metric = telemetry.COUNTING_MISSES.labels(report["model"])
    start = metric._value.get()
    event = {"exception": error, "litellm_call_id": "call-1", "litellm_params": {"metadata": fitted["metadata"]}}
    with caplog.at_level("WARNING", logger="context_guard"):
        run(g.async_log_failure_event(event, None, None, None))
        g.log_failure_event(event, None, None, None)  # the same call reported twice: counted once
    assert metric._value.get() == start + 1
    assert "counting miss" in caplog.text and "question" not in caplog.text and "lorem" not in caplog.text
    others = [
        {
            **event,
            "litellm_call_id": "call-2",
            "exception": litellm.BadRequestError(message="x", model="m", llm_provider="openai"),
        },
        {**event, "litellm_call_id": "call-3", "litellm_params": {"metadata": {}}},  # not checked by the guard
        {
            **event,
            "litellm_call_id": "call-4",
            "litellm_params": {"metadata": {STATE_KEY: {**report, "outcome": "rejected"}}},
        },
        {"exception": error},  # no metadata at all
        "not a mapping",
    ]
    for other in others:
        run(g.async_log_failure_event(other, None, None, None))
    assert metric._value.get() == start + 1


def test_a_prompt_on_a_route_the_guard_cannot_fit_is_counted_once_and_refused_on_policy(caplog):
    """Issue 35: a pass-through (or any call type without a route) carrying a prompt is counted once per
    call, logged once per call type without its text, and refused with a 400 under on_unguarded: refuse."""
    from guard.shell.unguarded import UnguardedRequestError
    from guard.state import telemetry

    def pass_through(cg, data, call_type="pass_through_endpoint"):
        return run(cg.async_pre_call_hook(UserAPIKeyAuth(api_key="k"), None, data, call_type))

    start = _sample(telemetry.UNGUARDED, call_type="pass_through_endpoint")
    data = {**body(3), "litellm_call_id": "pt-1"}
    sent = copy.deepcopy(data)
    assert pass_through(guard(), data) == sent  # forwarded unchanged
    run(guard().async_pre_call_deployment_hook(data, "pass_through_endpoint"))  # the same call again: one count
    assert _sample(telemetry.UNGUARDED, call_type="pass_through_endpoint") == start + 1
    assert not any("lorem" in r.getMessage() for r in caplog.records)

    refused = {**body(3), "litellm_call_id": "pt-2"}
    with pytest.raises(UnguardedRequestError, match="on_unguarded: refuse") as e:
        pass_through(guard(on_unguarded="refuse"), refused)
    assert e.value.status_code == 400
    assert _sample(telemetry.UNGUARDED, call_type="pass_through_endpoint") == start + 2

    # what carries no context to fit is neither counted nor refused
    strict = guard(on_unguarded="refuse")
    for call_type, other in [
        ("aembedding", {"model": "m", "input": ["a", "b"]}),
        ("aspeech", {"model": "m", "input": "hi"}),
        ("image_generation", {"model": "m", "prompt": "a cat"}),
        ("pass_through_endpoint", {"model": "m", "input": ["text to embed"]}),
    ]:
        assert pass_through(strict, dict(other), call_type) == other
    assert _sample(telemetry.UNGUARDED, call_type="pass_through_endpoint") == start + 2


def test_the_prompt_digest_reads_the_prompt_not_litellms_plumbing():
    from guard.shell.repeats import prompt_digest

    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, "tools": [{"type": "function"}]}
    plumbing = {**body, "api_key": "k", "timeout": 5, "metadata": {"x": 1}, "litellm_logging_obj": object()}
    assert prompt_digest(body) == prompt_digest(plumbing) is not None
    assert prompt_digest({**body, "max_tokens": 11}) != prompt_digest(body)
    assert prompt_digest({**body, "messages": [{"role": "user", "content": "hi!"}]}) != prompt_digest(body)
    # what JSON cannot hold (an SDK object, a key that is not a string): no digest, the pass fits again
    assert prompt_digest({**body, "extra": object()}) is None
    assert prompt_digest({**body, 1: "x"}) is None


def test_an_sdk_call_s_only_pass_leaves_no_seal():
    # the SDK runs the deployment hook alone: no later pass will repeat it, so it serializes nothing
    from guard.shell import repeats

    g = guard(default_max_tokens=200)
    kwargs = {
        **body(),
        "litellm_call_id": "call-sdk-1",
        "model": "gpt-4o",
        "metadata": {"model_group": "m"},
        "model_info": {"max_input_tokens": 3000, "max_output_tokens": 500},
    }
    out = run(g.async_pre_call_deployment_hook(kwargs, litellm.types.utils.CallTypes.acompletion))
    assert out["metadata"][STATE_KEY]["outcome"] == "fitted"
    assert "call-sdk-1" not in repeats._SEALS
    first = run(
        g.async_pre_call_hook(
            UserAPIKeyAuth(api_key="k"), None, {**body(), "litellm_call_id": "call-px-1"}, "acompletion"
        )
    )
    assert first["metadata"][STATE_KEY]["passes"] == 1 and "call-px-1" in repeats._SEALS
