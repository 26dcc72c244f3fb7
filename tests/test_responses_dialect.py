"""The Responses API dialect: what its items are to the core, how they are counted, grouped, cut
and reported."""

from __future__ import annotations

import base64
import json

import pytest

from bench.traces import agent_trace, blank_png, to_responses
from guard.cli import main as cli_main
from guard.core import coexistence
from guard.core.config import Deployment
from guard.core.encodings import get_encoding
from guard.core.errors import BadRequest, ContextWindowExceeded
from guard.core.policy import Policy, PolicySet
from guard.core.tokens import TokenCounter
from guard.dialects import RESPONSES, by_name, detect
from guard.dialects.responses import LOADED_TOOLS_PROMPT
from guard.fit.engine import Engine

ENC = get_encoding("o200k_base")


def _engine(window: int = 8192, **policy) -> Engine:
    return Engine(
        PolicySet(defaults=Policy(**{"keep_recent_groups": 2, "default_max_tokens": 512, **policy})),
        deployments={"small": Deployment("small", "gpt-4o", {"max_input_tokens": window, "max_output_tokens": 2048})},
        model_map={},
    )


def _loop(turns: int = 40) -> dict:
    body = agent_trace(turns=turns, seed=turns, scale=0.05)
    body["messages"].append({"role": "user", "content": "so what broke?"})
    return to_responses(body, model="small")


def test_detected_by_its_fields_and_named():
    assert detect({"model": "m", "input": "hi"}) is RESPONSES
    assert detect({"model": "m", "instructions": "x", "input": []}) is RESPONSES
    assert detect({"model": "m", "messages": [], "input": "x"}) is not RESPONSES  # a chat body first
    assert by_name("responses") is RESPONSES
    with pytest.raises(ValueError, match="responses"):
        by_name("gemini")


def test_items_are_turns_calls_results_and_pinned_parts():
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c1", "output": "42"}
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}
    dev = {"role": "developer", "content": "rules"}
    d = RESPONSES
    assert d.tool_call_ids(call) == ["c1"] and d.tool_result_ids(out) == ["c1"]
    assert d.tool_results(out) == [(None, "42")] and d.tool_results(call) == []
    assert d.with_tool_result(out, None, "short")["output"] == "short" and out["output"] == "42"
    assert d.is_user_turn(user) and not d.is_user_turn(out) and d.is_system(dev) and not d.is_system(user)
    assert d.output_key({}, "gpt-4o") == "max_output_tokens"
    assert d.messages({"input": "hello"}) == [{"role": "user", "content": "hello"}]
    marker = d.marker("[context-guard: x]")
    assert marker["content"][0]["type"] == "input_text"


def test_a_reasoning_item_is_grouped_with_the_item_after_it_and_parallel_calls_with_their_outputs():
    items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "e"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "3"},
        {"type": "reasoning", "id": "rs_2", "encrypted_content": "e"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "function_call_output", "call_id": "elsewhere", "output": "held by previous_response_id"},
    ]
    assert RESPONSES.groups(items) == [0, 1, 1, 1, 1, 1, 2, 2, 3, 3, 4]


def test_counts_every_kind_of_item_and_the_pinned_parts():
    counter = TokenCounter(ENC)
    n = lambda text: len(ENC.encode_ordinary(text))  # noqa: E731
    text_item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello world"}]}
    assert counter.message(RESPONSES, text_item) == 3 + n("user") + n("hello world")
    call = {"type": "function_call", "call_id": "call_7Hq2", "name": "grep", "arguments": '{"q":"x"}'}
    assert counter.message(RESPONSES, call) == 3 + n("grep") + n('{"q":"x"}') + n("call_7Hq2")  # the id is billed
    output = {"type": "function_call_output", "call_id": "c", "output": "result text"}
    assert counter.message(RESPONSES, output) == 3 + n("result text")
    # sealed reasoning: billed as the model's reasoning tokens, counted from the payload's size
    # (2,000 base64 characters: 1,500 bytes, 900 past the fixed part, a token every 4), not as
    # the base64's own tokens
    sealed = "gAAAAABq" + "x7Kp" * 498
    reasoning = {"type": "reasoning", "id": "rs", "encrypted_content": sealed, "summary": []}
    assert counter.message(RESPONSES, reasoning) == 3 + 225 < n(sealed) // 2
    summary = [{"type": "summary_text", "text": "Checked the imports."}]
    assert counter.message(RESPONSES, {**reasoning, "summary": summary}) == 3 + 225 + n("Checked the imports.")
    # a web search's item stands for the pages it read, which the provider keeps in the context
    search = {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
    assert counter.message(RESPONSES, search) > 4000
    # tool definitions loaded mid-conversation: rendered as the request's tools are, plus a preamble
    tool = {
        "type": "function",
        "name": "lookup_exchange_rate",
        "description": "Look up an exchange rate.",
        "parameters": {"type": "object", "properties": {"currency": {"type": "string"}}, "required": ["currency"]},
        "strict": True,
    }
    loaded = {"type": "additional_tools", "role": "developer", "tools": [tool]}
    as_tools = counter.fixed(RESPONSES, {"input": [], "tools": [tool]}) - counter.fixed(RESPONSES, {"input": []})
    assert counter.message(RESPONSES, loaded) == 3 + n("developer") + LOADED_TOOLS_PROMPT + as_tools
    assert counter.message(RESPONSES, loaded) > 3 + n(json.dumps(loaded, separators=(",", ":")))
    image = {
        "role": "user",
        "content": [{"type": "input_image", "image_url": "https://x.invalid/a.png", "detail": "low"}],
    }
    assert counter.message(RESPONSES, image) == 3 + n("user") + 85  # low detail: OpenAI's flat 85
    unknown = {"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}
    assert counter.message(RESPONSES, unknown) > counter.message(RESPONSES, image)  # size unseen: the formula's largest
    pdf = base64.b64encode(b"%PDF-1.4 /Type /Page /Type /Page").decode()
    doc = {
        "role": "user",
        "content": [{"type": "input_file", "filename": "a.pdf", "file_data": f"data:application/pdf;base64,{pdf}"}],
    }
    assert counter.message(RESPONSES, doc) >= 2 * 1500
    body = {
        "instructions": "be brief",
        "input": [],
        "tools": [{"type": "web_search"}],
        "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}},
    }
    bare = counter.fixed(RESPONSES, {"input": []})
    assert counter.fixed(RESPONSES, body) >= bare + n("be brief") + n(json.dumps({"type": "web_search"})) + 10


def test_screenshots_and_made_images_count_as_images_not_as_their_base64():
    """A computer-use loop sends each screenshot back as a `computer_call_output`; an image the
    model made comes back as an `image_generation_call`'s `result`. Each costs what the image
    formula says (a 1024x1024 image: 765, OpenAI's documented example), plus the rest of the item
    as its JSON; counted as text, three noisy screenshots made a request of millions of tokens."""
    counter = TokenCounter(ENC)
    n = lambda text: len(ENC.encode_ordinary(text))  # noqa: E731
    png = blank_png(1024, 1024)
    shot = {
        "type": "computer_call_output",
        "call_id": "call_1",
        "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{png}"},
    }
    rest = {"type": "computer_call_output", "call_id": "call_1"}
    assert counter.message(RESPONSES, shot) == 3 + n(json.dumps(rest, separators=(",", ":"))) + 765
    by_id = {**shot, "output": {"type": "computer_screenshot", "file_id": "file-9"}}
    assert 765 < counter.message(RESPONSES, by_id) < 1600  # size unseen: the formula's largest
    made = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": png}
    assert (
        counter.message(RESPONSES, made)
        == 3 + n(json.dumps({k: v for k, v in made.items() if k != "result"}, separators=(",", ":"))) + 765
    )
    noise = base64.b64encode(bytes(range(256)) * 4000).decode()  # not an image: its size unreadable
    assert counter.message(RESPONSES, {**made, "result": noise}) < 1600


def test_a_computer_use_loop_that_fits_is_forwarded_untouched():
    png = blank_png(1280, 800)
    items: list[dict] = [{"role": "user", "content": "open the settings"}]
    for i in range(20):
        items += [
            {"type": "computer_call", "call_id": f"c{i}", "action": {"type": "screenshot"}, "status": "completed"},
            {
                "type": "computer_call_output",
                "call_id": f"c{i}",
                "output": {"type": "computer_screenshot", "image_url": f"data:image/png;base64,{png}"},
            },
        ]
    body = {"model": "gpt-4o", "input": items, "max_output_tokens": 1000}
    fitted = Engine().fit(body)
    assert fitted.body["input"] is items and not fitted.report.actions
    assert 20 * 1105 < fitted.report.input_tokens_before < 20 * 1250  # 1280x800: 3x2 tiles, 1,105 each


def test_an_older_output_of_images_only_is_truncated_to_an_input_text_line():
    """A Responses `function_call_output` whose output is images only: truncated, it keeps the
    line that says what went as an `input_text` part (the only text part such an output takes)."""
    shot = {"type": "input_image", "image_url": "https://example.com/s.png"}
    items: list[dict] = [{"role": "user", "content": "check the dashboards"}]
    for i in range(12):
        items += [
            {"type": "function_call", "call_id": f"c{i}", "name": "screenshot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": [shot]},
        ]
    items.append({"role": "user", "content": "what changed?"})
    body = {"model": "m", "input": items, "max_output_tokens": 100}
    policy = Policy(safety_margin_ratio=0.0, safety_margin_tokens=0)
    deployments = {"m": Deployment("m", "gpt-4o", {"max_input_tokens": 12_000, "max_output_tokens": 1000})}
    fitted = Engine(PolicySet(defaults=policy), deployments=deployments, model_map={}).fit(body)
    assert [a.kind for a in fitted.report.actions] == ["truncate_tool_results"]
    outputs = [item["output"] for item in fitted.body["input"] if item.get("type") == "function_call_output"]
    assert outputs[0] == [{"type": "input_text", "text": "[context-guard: 1 input_image part removed]"}]
    assert outputs[-1] == [shot]


def test_bad_items_are_clear_errors():
    engine = _engine()
    for bad, where in (
        ({"input": 5}, "'input'"),
        ({"input": [3]}, "input[0]"),
        ({"input": [{"type": 7}]}, "input[0].type"),
        ({"input": [{"role": None, "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}, "input[0].output"),
    ):
        with pytest.raises(BadRequest, match=where.replace("[", r"\[").replace("]", r"\]")):
            engine.fit({"model": "small", **bad}, dialect="responses")


def test_an_agent_loop_is_fitted_with_pairs_and_reasoning_intact():
    body = _loop()
    fitted = _engine().fit(body)
    report, sent = fitted.report, fitted.body["input"]
    assert report.dialect == "responses" and report.outcome == "fitted"
    assert report.input_tokens_before > 8192 >= report.input_tokens_after + fitted.body["max_output_tokens"]
    assert fitted.body["instructions"] == body["instructions"] and fitted.body["tools"] == body["tools"]
    originals = [json.dumps(i) for i in body["input"]]
    for k, item in enumerate(sent):
        if item.get("type") == "reasoning":
            j = originals.index(json.dumps(item))
            assert sent[k + 1] == body["input"][j + 1]
    calls = [i["call_id"] for i in sent if i.get("type") == "function_call"]
    assert calls == [i["call_id"] for i in sent if i.get("type") == "function_call_output"]
    assert sent[-1] == body["input"][-1]


def test_a_string_input_too_long_is_refused_with_the_numbers():
    with pytest.raises(ContextWindowExceeded) as caught:
        _engine().fit({"model": "small", "input": "lorem ipsum " * 8000})
    assert caught.value.report.dialect == "responses" and caught.value.report.output_key == "max_output_tokens"


def test_provider_held_state_is_reported_and_counted_as_a_lower_bound():
    fitted = _engine().fit(
        {"model": "small", "input": "and then?", "previous_response_id": "resp_1", "conversation": "conv_1"}
    )
    assert fitted.report.unseen_state == ["previous_response_id", "conversation"]
    assert _engine().fit({"model": "small", "input": "hi"}).report.unseen_state == []


def test_provider_side_context_managers_are_named():
    body = {
        "input": [],
        "context_management": [{"type": "compaction", "compact_threshold": 2000}],
        "truncation": "auto",
    }
    assert coexistence.detect(body) == ["openai_context_management", "openai_truncation_auto"]
    assert coexistence.detect({"messages": [], "truncation": "auto"}) == []


def test_cli_fits_a_responses_body(tmp_path, capsys):
    path = tmp_path / "req.json"
    path.write_text(json.dumps({**_loop(), "model": "gpt-4o"}))
    out = tmp_path / "out.json"
    assert cli_main(["fit", str(path), "--dialect", "responses", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dialect"] == "responses" and report["output_key"] == "max_output_tokens"
    assert json.loads(out.read_text())["max_output_tokens"] == report["max_tokens"]


def test_a_codex_loop_with_sealed_reasoning_is_forwarded_while_its_reasoning_fits():
    """A reasoning agent's loop: every turn a sealed reasoning item (1,500 base64 characters: ~90
    reasoning tokens at the rate bench.usage measured), a call and its output. Counted as base64
    text, 40 such items came to tens of thousands of tokens more than the provider bills, and a
    request that fits its 16k window was cut; counted as the reasoning they stand for, it is
    forwarded as sent."""
    sealed = base64.b64encode(bytes(range(256)) * 4)[:1500].decode()  # (1,125 bytes: 132 tokens)
    items: list[dict] = [{"type": "message", "role": "user", "content": "fix the failing test"}]
    for i in range(40):
        items += [
            {"type": "reasoning", "id": f"rs_{i}", "summary": [], "encrypted_content": sealed},
            {"type": "function_call", "call_id": f"call_{i:024d}", "name": "exec", "arguments": '{"cmd":"ls"}'},
            {"type": "function_call_output", "call_id": f"call_{i:024d}", "output": f"file_{i}.py " * 20},
        ]
    body = {"model": "small", "input": items, "max_output_tokens": 1024}
    counter = TokenCounter(ENC)
    as_text = sum(counter.message(RESPONSES, {"type": "message", "role": "user", "content": sealed}) for _ in range(40))
    fitted = _engine(16_384).fit(body, dialect="responses")
    assert not fitted.report.changed and fitted.body["input"] == items
    assert fitted.report.input_tokens_before + as_text > 16_384  # as text, it would not have fit


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_responses_body_for_claude_counts_as_the_messages_request_litellm_sends(seed):
    """LiteLLM sends a Responses body for a Claude model as chat messages, then as an Anthropic
    Messages request: its count is that request's (Anthropic's framing of messages, calls and
    results, and the tool-use prompt), which the chat count of Claude bodies is measured against
    (bench.usage). Counted with OpenAI's item framing it was 9-11% under."""
    import copy

    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig,
    )

    from guard.dialects import OPENAI

    engine = Engine(PolicySet(defaults=Policy()))
    counter, _ = engine.counter_for("claude-sonnet-4-5", engine.policy_for("claude-sonnet-4-5"))
    assert counter.renders == "anthropic"
    body = to_responses(agent_trace(turns=30, seed=seed, scale=0.05), model="claude-sonnet-4-5", reasoning=False)
    params = {k: v for k, v in body.items() if k not in ("model", "input")}
    chat = LiteLLMCompletionResponsesConfig.transform_responses_api_request_to_chat_completion_request(
        model="anthropic/claude-sonnet-4-5",
        input=copy.deepcopy(body["input"]),
        responses_api_request=params,
        custom_llm_provider="anthropic",
    )
    sent = counter.body(OPENAI, {"model": "claude-sonnet-4-5", "messages": chat["messages"], "tools": chat["tools"]})
    assert sent <= counter.body(RESPONSES, body) <= 1.03 * sent
    # an OpenAI model's items keep OpenAI's framing
    gpt, _ = engine.counter_for("gpt-4o", engine.policy_for("gpt-4o"))
    item = {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"}
    assert gpt.message(RESPONSES, item) < counter.message(RESPONSES, item) - 10
