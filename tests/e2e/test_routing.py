"""Issue 14 through a real proxy: thinking budgets under caps, mixed-window groups, context-window
fallbacks before lossy cuts, and reports that describe the attempt that served the reply.

The upstream enforces Anthropic's thinking rule (1024 <= budget_tokens < max_tokens) besides every
model's window, so a request the guard leaves invalid comes back as the provider's 400.
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import anthropic
import httpx
import openai
import pytest

from bench.traces import agent_trace
from tests.e2e.conftest import Proxy, start_proxy, stop_proxy


def routing_config(port: int) -> str:
    base = f"http://127.0.0.1:{port}"
    return f"""
model_list:
  - model_name: claude-cap
    litellm_params: {{model: anthropic/claude-sonnet-4-5, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 200000, max_output_tokens: 8192}}
  - model_name: claude-small
    litellm_params: {{model: anthropic/claude-8k, api_base: "{base}", api_key: dummy}}
    model_info: {{max_input_tokens: 8192, max_output_tokens: 8192}}
  - model_name: mixed
    litellm_params: {{model: openai/gpt-4o-16k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 16384, max_output_tokens: 4096}}
  - model_name: mixed
    litellm_params: {{model: openai/gpt-4o-131k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 131072, max_output_tokens: 4096}}
  - model_name: small
    litellm_params: {{model: openai/gpt-4o-16k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 16384, max_output_tokens: 4096}}
  - model_name: big
    litellm_params: {{model: openai/gpt-4o-131k, api_base: "{base}/v1", api_key: dummy}}
    model_info: {{max_input_tokens: 131072, max_output_tokens: 4096}}
litellm_settings:
  callbacks: [guard.proxy.context_guard]
  num_retries: 0
  context_window_fallbacks: [{{"small": ["big"]}}]
general_settings:
  master_key: sk-master
  custom_auth: tests.e2e.auth.user_api_key_auth
context_guard:
  defaults:
    default_max_tokens: 512
    keep_recent_groups: 2
  teams:
    team-a: {{max_output_tokens: 128}}
    team-c: {{max_output_tokens: 2048}}
    team-trim: {{context_fallbacks: after_cutting}}
    team-clamp: {{min_output_tokens: 1100}}
"""


@pytest.fixture(scope="module")
def rproxy(upstream, tmp_path_factory) -> Iterator[Proxy]:
    workdir = tmp_path_factory.mktemp("routing")
    proc, url, log = start_proxy(routing_config(upstream.port), workdir)  # type: ignore[attr-defined]
    yield Proxy(url, upstream, log, workdir / "none")
    stop_proxy(proc)


def oai(p: Proxy, key: str = "sk-master") -> openai.OpenAI:
    return openai.OpenAI(base_url=p.url, api_key=key, max_retries=0, timeout=120)


def anth(p: Proxy, key: str = "sk-master") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=p.url, api_key=key, max_retries=0, timeout=120)


def cc_messages() -> dict[str, Any]:
    return dict(
        model="claude-cap",
        system=[{"type": "text", "text": "You are a coding agent."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "fix the failing test"}]}],
    )


def metric(p: Proxy, name: str, **labels: str) -> float:
    text = httpx.get(p.url + "/metrics/", headers={"authorization": "Bearer sk-master"}, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.parametrize("stream", [False, True])
def test_claude_code_thinking_under_a_model_cap_reaches_the_provider_valid(rproxy, stream):
    rproxy.reset()
    kwargs = dict(**cc_messages(), max_tokens=32000, thinking={"type": "enabled", "budget_tokens": 31999})
    if stream:
        with anth(rproxy).messages.stream(**kwargs) as s:
            s.get_final_message()
    else:
        resp = anth(rproxy).messages.with_raw_response.create(**kwargs)
        assert resp.http_response.headers["x-context-guard-reasoning"] == "thinking.budget_tokens=31999->8191"
        assert "clamp_thinking" in resp.http_response.headers["x-context-guard-actions"]
    body = rproxy.received[-1]["body"]
    assert body["max_tokens"] == 8192 and body["thinking"]["budget_tokens"] == 8191


def test_thinking_under_a_team_cap_is_accepted(rproxy):
    rproxy.reset()
    anth(rproxy, "sk-team-c").messages.create(
        **cc_messages(), max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 3000}
    )
    body = rproxy.received[-1]["body"]
    assert body["max_tokens"] == 2048 and body["thinking"]["budget_tokens"] == 1024


def test_a_cap_with_no_room_for_thinking_is_the_guards_400_not_the_providers(rproxy):
    rproxy.reset()
    with pytest.raises(anthropic.BadRequestError) as err:
        anth(rproxy, "sk-team-a").messages.create(
            **cc_messages(), max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2000}
        )
    assert "capped at 128" in str(err.value) and "thinking budget" in str(err.value)
    assert rproxy.received == []


def test_thinking_survives_the_clamp_step(rproxy):
    """The clamp step lowers max_tokens to make room for the input: the budget comes down with it."""
    rproxy.reset()
    text = "the pool timed out waiting for a connection " * 560  # ~5k tokens on an 8k window
    anth(rproxy, "sk-team-clamp").messages.create(
        model="claude-small",
        max_tokens=6000,
        thinking={"type": "enabled", "budget_tokens": 5000},
        messages=[{"role": "user", "content": text}],
    )
    got = rproxy.received[-1]
    body = got["body"]
    assert 1100 <= body["max_tokens"] < 6000 and 1024 <= body["thinking"]["budget_tokens"] < body["max_tokens"]
    assert got["input_tokens"] + body["max_tokens"] <= 8192


@pytest.mark.parametrize("effort", ["medium", "high"])
def test_reasoning_effort_on_the_chat_route_under_a_2048_cap(rproxy, effort):
    rproxy.reset()
    resp = oai(rproxy, "sk-team-c").chat.completions.with_raw_response.create(
        model="claude-cap",
        messages=[{"role": "user", "content": "think about it"}],
        max_tokens=8000,
        reasoning_effort=effort,
    )
    assert resp.http_response.status_code == 200
    body = rproxy.received[-1]["body"]
    assert body["max_tokens"] == 2048 and 1024 <= body["thinking"]["budget_tokens"] < 2048


def test_a_mixed_window_group_serves_what_its_big_deployment_can_take(rproxy):
    big_question = (
        "please review this log line by line: " + "error at pool.py:42 timeout waiting for connection\n" * 2600
    )
    for _ in range(4):  # the router load-balances: every try must land on the 131k deployment
        rproxy.reset()
        resp = oai(rproxy).chat.completions.with_raw_response.create(
            model="mixed", messages=[{"role": "user", "content": big_question}], max_tokens=200
        )
        assert resp.http_response.status_code == 200
        got = rproxy.received
        assert [r["body"]["model"] for r in got] == ["gpt-4o-131k"]
        assert got[0]["input_tokens"] > 20_000
        assert resp.http_response.headers["x-context-guard-window"] == "131072"


def _sent(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if v is not None}  # LiteLLM drops `content: None` on the way


def trace() -> list[dict[str, Any]]:
    body = agent_trace(turns=60, seed=60, scale=0.3)
    return body["messages"] + [{"role": "user", "content": "so what broke?"}]


def test_fallbacks_come_before_lossy_cuts_and_reports_name_the_model_that_served(rproxy):
    msgs = trace()
    before_big = metric(rproxy, "context_guard_requests_total", model="big")
    before_small_rejected = metric(rproxy, "context_guard_requests_total", model="small", outcome="rejected")
    before_fb = metric(rproxy, "context_guard_fallbacks_total", model="small", to="big")
    rproxy.reset()
    resp = oai(rproxy).chat.completions.with_raw_response.create(model="small", messages=msgs, max_tokens=300)
    got = rproxy.received
    assert [r["body"]["model"] for r in got] == ["gpt-4o-131k"]
    assert [_sent(m) for m in got[0]["body"]["messages"]] == [_sent(m) for m in msgs]  # every message, whole
    headers = resp.http_response.headers
    assert headers["x-context-guard-model"] == "big" and headers["x-context-guard-window"] == "131072"
    assert headers["x-context-guard-outcome"] == "unchanged"
    assert metric(rproxy, "context_guard_requests_total", model="big") == before_big + 1
    assert metric(rproxy, "context_guard_requests_total", model="small", outcome="rejected") == before_small_rejected
    assert metric(rproxy, "context_guard_fallbacks_total", model="small", to="big") == before_fb + 1


def test_the_trim_first_policy_cuts_on_the_requested_model(rproxy):
    msgs = trace()
    rproxy.reset()
    resp = oai(rproxy, "sk-team-trim").chat.completions.with_raw_response.create(
        model="small", messages=msgs, max_tokens=300
    )
    got = rproxy.received
    assert [r["body"]["model"] for r in got] == ["gpt-4o-16k"]
    assert got[0]["input_tokens"] + 300 <= 16384 and len(got[0]["body"]["messages"]) < len(msgs)
    assert resp.http_response.headers["x-context-guard-outcome"] == "fitted"
    assert resp.http_response.headers["x-context-guard-model"] == "small"


def test_a_hopeless_request_names_every_model_tried(rproxy):
    rproxy.reset()
    huge = "lorem ipsum dolor sit amet " * 40000  # ~160k tokens: more than either window
    with pytest.raises(openai.BadRequestError) as err:
        oai(rproxy).chat.completions.create(model="small", messages=[{"role": "user", "content": huge}], max_tokens=100)
    message = str(err.value)
    assert "16384" in message and "big: needs" in message and "> 131072" in message
    assert err.value.response.headers["x-context-guard-models-tried"] == "small,big"
    assert rproxy.received == []


def test_messages_refusals_carry_headers_and_anthropics_words(rproxy):
    rproxy.reset()
    huge = "lorem ipsum dolor sit amet " * 50000
    with pytest.raises(anthropic.BadRequestError) as err:
        anth(rproxy).messages.create(model="claude-cap", max_tokens=1000, messages=[{"role": "user", "content": huge}])
    message = err.value.body["error"]["message"]
    assert message.startswith("prompt is too long: ") and " tokens > 200000 maximum" in message
    headers = err.value.response.headers
    assert headers["x-context-guard-outcome"] == "rejected" and headers["x-context-guard-window"] == "200000"
    assert rproxy.received == []


def test_prompt_cache_usage_and_room_left_are_reported(rproxy):
    """Issue 10, item 4 (part): the provider's cache report reaches /metrics; every guarded response
    tells the client how much room is left."""
    from tests.e2e.upstream import cached_tokens

    text = "the pool timed out waiting for a connection " * 400  # ~3.6k tokens
    before = {
        k: metric(rproxy, "context_guard_prompt_cache_tokens_total", model="big", kind=k) for k in ("read", "uncached")
    }
    rproxy.reset()
    resp = oai(rproxy).chat.completions.with_raw_response.create(
        model="big", messages=[{"role": "user", "content": text}], max_tokens=100
    )
    n = rproxy.received[-1]["input_tokens"]
    headers = resp.http_response.headers
    assert int(headers["x-context-guard-room-left"]) == 131072 - 100 - 1311 - int(
        headers["x-context-guard-tokens-after"]
    )
    for _ in range(50):  # the success callback runs after the response is sent
        if metric(rproxy, "context_guard_prompt_cache_tokens_total", model="big", kind="read") > before["read"]:
            break
        time.sleep(0.1)
    assert metric(rproxy, "context_guard_prompt_cache_tokens_total", model="big", kind="read") == before[
        "read"
    ] + cached_tokens(n)
    assert metric(rproxy, "context_guard_prompt_cache_tokens_total", model="big", kind="uncached") == before[
        "uncached"
    ] + n - cached_tokens(n)
    # Anthropic's own fields, through /v1/messages
    rproxy.reset()
    anth(rproxy).messages.create(model="claude-cap", max_tokens=100, messages=[{"role": "user", "content": text}])
    n = rproxy.received[-1]["input_tokens"]
    for _ in range(50):
        if metric(rproxy, "context_guard_prompt_cache_tokens_total", model="claude-cap", kind="read") >= cached_tokens(
            n
        ):
            break
        time.sleep(0.1)
    assert metric(rproxy, "context_guard_prompt_cache_tokens_total", model="claude-cap", kind="read") == cached_tokens(
        n
    )


def test_metrics_add_up_across_proxy_workers(upstream, tmp_path):
    """Issue 10, item 4 (part): with `--num_workers 2` and PROMETHEUS_MULTIPROC_DIR, /metrics counts
    every request whichever worker served it (and whichever answers /metrics)."""
    multiproc = tmp_path / "prom"
    multiproc.mkdir()
    proc, url, log = start_proxy(
        routing_config(upstream.port),
        tmp_path,
        {"PROMETHEUS_MULTIPROC_DIR": str(multiproc)},
        args=["--num_workers", "2"],
    )
    from tests.e2e.upstream import cached_tokens

    text = "the pool timed out waiting for a connection " * 400  # ~3.6k tokens: the upstream reports cached input
    try:
        p = Proxy(url, upstream, tmp_path / "log", tmp_path / "none")
        p.reset()

        def served() -> set[str]:  # the workers that counted a request (their metric files' pids)
            return {f.name.split("_")[-1] for f in multiproc.glob("counter_*.db")}

        # a new connection each time, so the kernel spreads them over the workers; on a loaded
        # machine one worker may accept a dozen in a row, and a worker still importing LiteLLM
        # serves nothing yet, so send until both have served (12 requests at least, for up to
        # 240 s: on a slower machine, under the rest of the suite, one worker served every request
        # for 150 s once)
        n, deadline = 0, time.time() + 240
        while n < 12 or (time.time() < deadline and len(served()) < 2):
            if n >= 12:
                time.sleep(0.5)
            body = {"model": "big", "messages": [{"role": "user", "content": f"{text} {n}"}], "max_tokens": 20}
            r = httpx.post(
                url + "/chat/completions",
                json=body,
                headers={"authorization": "Bearer sk-master", "connection": "close"},
                timeout=60,
            )
            assert r.status_code == 200
            n += 1
        counts = [metric(p, "context_guard_requests_total", model="big") for _ in range(4)]
        assert counts == [float(n)] * 4
        assert len(served()) == 2, (
            f"one worker served all {n} requests; the proxy's log ends: {log.read_text()[-3000:]}"
        )
        # the provider's cache report, from each worker's success callback, summed too
        sent = [r["input_tokens"] for r in p.received]
        assert len(sent) == n
        read = sum(cached_tokens(n) for n in sent)
        for _ in range(50):  # success callbacks run after the responses are sent
            if metric(p, "context_guard_prompt_cache_tokens_total", model="big", kind="read") >= read:
                break
            time.sleep(0.1)
        for _ in range(4):
            assert metric(p, "context_guard_prompt_cache_tokens_total", model="big", kind="read") == read
            assert (
                metric(p, "context_guard_prompt_cache_tokens_total", model="big", kind="uncached") == sum(sent) - read
            )
    finally:
        stop_proxy(proc)


def test_cache_breakpoints_survive_a_cut_on_the_messages_route(rproxy):
    """Issue 10, item 2: a cache_control on an old message that gets dropped moves onto the guard's
    marker; the system prompt's breakpoint is untouched; never more than the client sent (<= 4)."""
    rproxy.reset()

    def result(t: int) -> str:  # distinct per turn, so dedupe has nothing to do
        return " ".join(f"part {t} line {i}: pool exhausted after {t * 7 + i} ms" for i in range(120))

    msgs: list[dict[str, Any]] = [{"role": "user", "content": "find why the pool times out"}]
    for t in range(60):
        use = {"type": "tool_use", "id": f"t{t}", "name": "read_log", "input": {"part": t}}
        if t == 1:
            use["cache_control"] = {"type": "ephemeral"}
        msgs.append({"role": "assistant", "content": [use]})
        msgs.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{t}", "content": result(t)}]}
        )
    system = [{"type": "text", "text": "You are a log analyst.", "cache_control": {"type": "ephemeral"}}]
    anth(rproxy).messages.create(model="claude-small", max_tokens=500, system=system, messages=msgs)
    body = rproxy.received[-1]["body"]
    sent_system = body["system"] if isinstance(body["system"], list) else [{"type": "text", "text": body["system"]}]
    assert sent_system[0].get("cache_control") == {"type": "ephemeral"} and sent_system[0]["text"] == system[0]["text"]
    blocks = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert not any(b.get("id") == "t1" for b in blocks), "turn 1 was meant to be dropped in this window"
    carried = [b for b in blocks if "cache_control" in b]
    assert len(carried) == 1 and carried[0]["text"].startswith("[context-guard:")
    assert len(carried) + 1 <= 4
