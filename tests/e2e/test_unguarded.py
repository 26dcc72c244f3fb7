"""Never silently unguarded (issue 35), through a real proxy with LiteLLM's own pass-through route.

LiteLLM's `/anthropic/...` pass-through forwards the client's body to Anthropic (here the strict
upstream, through `ANTHROPIC_API_BASE`) as is: the guard's pre-call hook sees it under the call type
`pass_through_endpoint` and cannot fit it. Such a request is counted in
`context_guard_unguarded_calls_total` and logged once with what to do, and refused before the
provider where the model's policy says `on_unguarded: refuse`. The fitted routes, under LiteLLM's
Python path and under its Rust core (`LITELLM_RUST=true`, where the release has one), are never
counted as unguarded."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.e2e.conftest import Proxy, start_proxy, stop_proxy
from tests.e2e.rust_core import assert_served_by
from tests.e2e.test_routing import metric

pytestmark = pytest.mark.slow

UNGUARDED = "context_guard_unguarded_calls_total"


def _config(port: int) -> str:
    base = f"http://127.0.0.1:{port}"
    return f"""
model_list:
  - model_name: small
    litellm_params: {{model: openai/gpt-4o-8k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
  - model_name: claude-small
    litellm_params: {{model: anthropic/claude-8k, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 2048}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
general_settings:
  master_key: sk-master
  pass_through_endpoints:
    - {{path: /claude-direct, target: "{base}/v1/messages"}}
context_guard:
  defaults: {{default_max_tokens: 512, on_unguarded: warn}}
  models:
    "claude-cap": {{on_unguarded: refuse}}
"""


@pytest.fixture(scope="module", params=["python", "rust"])
def uproxy(request, upstream, tmp_path_factory) -> Iterator[Proxy]:
    workdir = tmp_path_factory.mktemp(f"unguarded-{request.param}")
    env = {
        "ANTHROPIC_API_BASE": f"http://127.0.0.1:{upstream.port}",
        "ANTHROPIC_API_KEY": "dummy",
        "LITELLM_RUST": str(request.param == "rust"),
    }
    proc, url, log = start_proxy(_config(upstream.port), workdir, env)
    p = Proxy(url, upstream, log, workdir / "events.jsonl")
    p.rust = env["LITELLM_RUST"]  # type: ignore[attr-defined]
    yield p
    stop_proxy(proc)


def _pass_through(p: Proxy, model: str, text: str) -> httpx.Response:
    return httpx.post(
        p.url + "/anthropic/v1/messages",
        headers={"x-api-key": "sk-master", "anthropic-version": "2023-06-01"},
        json={"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": text}]},
        timeout=60,
    )


def test_a_pass_through_prompt_is_forwarded_counted_and_logged_once(uproxy):
    uproxy.reset()
    before = metric(uproxy, UNGUARDED, call_type="pass_through_endpoint")
    first = _pass_through(uproxy, "claude-8k", "unguarded one")
    second = _pass_through(uproxy, "claude-8k", "unguarded two")
    assert first.status_code == 200 and second.status_code == 200, first.text
    sent = [r["body"] for r in uproxy.received]
    assert [b["messages"][0]["content"] for b in sent] == ["unguarded one", "unguarded two"]
    assert all("max_tokens" in b and b["max_tokens"] == 16 for b in sent)  # unchanged: the guard did not fit it
    assert metric(uproxy, UNGUARDED, call_type="pass_through_endpoint") == before + 2
    log = uproxy.log.read_text()
    warnings = [line for line in log.splitlines() if "a pass_through_endpoint request reached" in line]
    assert len(warnings) == 1, warnings  # once per call type, not per request
    assert "on_unguarded: refuse" in warnings[0] and "/v1/messages" in warnings[0]
    assert "unguarded one" not in log and "unguarded two" not in log  # names and counts, never prompt text


def test_on_unguarded_refuse_stops_a_pass_through_prompt_before_the_provider(uproxy):
    uproxy.reset()
    before = metric(uproxy, UNGUARDED, call_type="pass_through_endpoint")
    answer = _pass_through(uproxy, "claude-cap", "refused here")
    assert answer.status_code == 400, answer.text
    assert "on_unguarded: refuse" in answer.text and "claude-cap" in answer.text
    assert uproxy.received == []  # nothing reached the provider
    assert metric(uproxy, UNGUARDED, call_type="pass_through_endpoint") == before + 1


def test_the_fitted_routes_are_never_counted_as_unguarded(uproxy):
    before = metric(uproxy, UNGUARDED)
    oa = openai.OpenAI(base_url=uproxy.url, api_key="sk-master", max_retries=0, timeout=60)
    oa.chat.completions.create(model="small", max_tokens=16, messages=[{"role": "user", "content": "chat"}])
    oa.responses.create(model="small", max_output_tokens=16, input=[{"role": "user", "content": "responses"}])
    an = anthropic.Anthropic(base_url=uproxy.url, api_key="sk-master", max_retries=0, timeout=60)
    raw = an.messages.with_raw_response.create(
        model="claude-small", max_tokens=16, messages=[{"role": "user", "content": "messages"}]
    )
    assert raw.headers.get("x-context-guard-outcome"), "the guard did not report on /v1/messages"
    assert_served_by(dict(raw.headers), "the proxy's /v1/messages", switch=uproxy.rust)  # where there is a core
    assert metric(uproxy, UNGUARDED) == before


def test_start_up_names_the_settings_that_route_around_the_hooks(uproxy):
    said = [line for line in uproxy.log.read_text().splitlines() if "context-guard start-up check" in line]
    assert any("pass_through_endpoints (/claude-direct)" in line for line in said), said
    rust = [line for line in said if "LITELLM_RUST is on" in line]
    assert len(rust) == (1 if uproxy.rust == "True" else 0), said
