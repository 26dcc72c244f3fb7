"""Tool schemas counted as OpenAI frames them (guard.core.toolschema), checked against the
provider's own counts of real requests (bench.usage) and on the shapes a body carries."""

from __future__ import annotations

import statistics

import pytest

from bench.usage import (
    BILLED_OVER_LATER,
    SEARCHED,
    UNLOGGED_TOOLS,
    billed_over_later,
    guard_count,
    image_requests,
    requests,
)
from guard.core import toolschema
from guard.core.policy import load_policy_set
from guard.core.tokens import TokenCounter
from guard.dialects import by_name
from guard.fit.engine import Engine

SCHEMA = {
    "type": "object",
    "properties": {
        "phone_number": {"type": "string", "description": "The phone number to search for.", "title": "Phone Number"},
        "limit": {"type": "integer", "title": "Limit"},
        "kind": {"enum": ["mobile", "landline"]},
        "ids": {"type": "array", "items": {"type": "string"}},
        "filter": {
            "type": "object",
            "properties": {"since": {"type": "string", "description": "An ISO date."}},
            "required": ["since"],
        },
    },
    "required": ["phone_number"],
}


def test_a_function_renders_as_openai_reads_it():
    text = toolschema.render_functions([("get_customer", "Finds a customer.\nBy phone.", SCHEMA)])
    assert text is not None
    assert text.splitlines() == [
        "# Tools",
        "",
        "## functions",
        "",
        "namespace functions {",
        "",
        "// Finds a customer.",
        "// By phone.",
        "type get_customer = (_: {",
        "// The phone number to search for.",
        "phone_number: string, // Phone Number",
        "limit?: number, // Limit",
        'kind?: "mobile" | "landline",',
        "ids?: string[],",
        "filter?: {",
        "  // An ISO date.",
        "  since: string,",
        "},",
        "}) => any;",
        "",
        "} // namespace functions",
    ]


def test_every_shape_of_function_tool_is_read_and_other_tools_are_not():
    chat = {"type": "function", "function": {"name": "f", "description": "d", "parameters": SCHEMA}}
    responses = {"type": "function", "name": "f", "description": "d", "parameters": SCHEMA}
    anthropic = {"name": "f", "description": "d", "input_schema": SCHEMA}
    assert toolschema.function_of(chat) == toolschema.function_of(responses) == toolschema.function_of(anthropic)
    for other in (
        {"type": "web_search"},
        {"type": "custom", "name": "apply_patch"},
        "search",
        None,
        {"type": "function"},
    ):
        assert toolschema.function_of(other) is None


def test_a_schema_the_rendering_cannot_speak_for_is_counted_as_json():
    ref = {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"type": "string"}}}
    assert toolschema.render_functions([("f", "", ref)]) is None
    counter = Engine(load_policy_set({})).counter_for("gpt-4.1", Engine(load_policy_set({})).policy_for("gpt-4.1"))[0]
    assert counter.tool_framing == "openai"
    tools = [{"type": "function", "function": {"name": "f", "parameters": ref}}]
    json_counter = TokenCounter(counter.encoding)  # (the JSON framing every other family gets)
    body = {"model": "gpt-4.1", "messages": [], "tools": tools}
    assert counter.fixed(by_name("openai"), body) == json_counter.fixed(by_name("openai"), body)


def test_only_the_openai_family_is_framed_as_openai_frames_it():
    engine = Engine(load_policy_set({}))
    for model, framing in (
        ("gpt-4.1", "openai"),
        ("gpt-4o-mini", "openai"),
        ("gpt-5-mini", "openai-reasoning"),
        ("o3", "openai-reasoning"),
        ("claude-sonnet-4-5", "json"),
    ):
        assert engine.counter_for(model, engine.policy_for(model))[0].tool_framing == framing, model
    # a reasoning model's chat tools cost its preamble too; its Responses tools do not
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    reasoning = engine.counter_for("gpt-5-mini", engine.policy_for("gpt-5-mini"))[0]
    plain = engine.counter_for("gpt-4.1", engine.policy_for("gpt-4.1"))[0]
    for dialect, extra in (("openai", toolschema.REASONING_TOOLS_PREAMBLE), ("responses", 0)):
        body = {"messages": [], "input": [], "tools": tools}
        assert reasoning.fixed(by_name(dialect), body) - plain.fixed(by_name(dialect), body) == extra
    pinned = Engine(load_policy_set({"defaults": {"calibration": {"openai": 1.1}}}))
    assert pinned.counter_for("gpt-4.1", pinned.policy_for("gpt-4.1"))[0].tool_framing == "json"  # an estimate


REQUESTS = requests()


@pytest.mark.parametrize(
    "corpus", sorted({name for name, _, _ in REQUESTS if name.startswith("tau2") and BILLED_OVER_LATER not in name})
)
def test_openai_counts_with_tools_sit_at_the_providers(corpus):
    """bench.usage's real gpt-4.1 requests (13-15 tool schemas each): the guard's count is
    0.99-1.04x the provider's on every request (counted as compact JSON, the schemas made it
    1.03-1.21x). Left out: the telecom runs' 4 requests in 164 billed over a later request of the
    same conversation, which holds every message of them (201-292 tokens over the rebuilt request's,
    on turns where the simulated customer used its own phone tools): what the agent sent there is
    not all in the run's log."""
    engine = Engine(load_policy_set({}))
    ratios = [guard_count(engine, body) / billed for name, body, billed in REQUESTS if name == corpus]
    assert len(ratios) >= 100
    assert 0.99 <= min(ratios) and max(ratios) <= 1.04
    assert 0.99 <= statistics.median(ratios) <= 1.02


def test_nested_parameters_descriptions_count_as_openai_bills_them():
    """GitHub Copilot Chat's requests in VS Code (gpt-5.1 through the Responses API, 36 tool schemas,
    objects and arrays of objects among their parameters, each nested parameter described): the
    guard's count is within 0.1% of the provider's. Without the nested parameters' descriptions
    (the rendering before session 55) it was 0.988x: OpenAI renders a description at every depth."""
    engine = Engine(load_policy_set({}))
    rows = [(body, billed) for name, body, billed in REQUESTS if name == "vscode copilot chat, gpt-5.1, tools"]
    assert len(rows) == 3 and all(len(body["tools"]) == 36 for body, _ in rows)
    ratios = [guard_count(engine, body) / billed for body, billed in rows]
    assert all(0.999 <= r <= 1.001 for r in ratios), ratios


@pytest.mark.parametrize(
    "model,tools,least,most",
    [("gpt-4o-mini", 0, 0.999, 1.001), ("gpt-5.3-codex", 13, 1.0, 1.01), ("claude-opus-4.6", 61, 1.0, 1.1)],
)
def test_copilots_requests_of_other_models_count_at_or_just_over_the_providers(model, tools, least, most):
    """Another user's GitHub Copilot Chat session (bench.usage's copilot-lens rows): gpt-4o-mini
    chat completions without tools count exactly as billed, gpt-5.3-codex's Responses requests with
    13 tools within 0.5% over, and Claude Opus 4.6's Messages requests with 61 or 73 tools a few
    percent over, never under (`litellm.token_counter` counts those 0.73-0.75x)."""
    engine = Engine(load_policy_set({}))
    prefix = f"vscode copilot chat, {model}, "
    rows = [(body, billed) for name, body, billed in REQUESTS if name.startswith(prefix)]
    assert len(rows) >= 6 and all(len(body.get("tools") or []) >= tools for body, _ in rows)
    ratios = [guard_count(engine, body) / billed for body, billed in rows]
    assert all(least <= r <= most for r in ratios), ratios


def test_only_requests_billed_over_a_later_one_are_left_out():
    """The requests bench.usage leaves out of a conversation are those billed more than a request
    after them (which holds all of theirs), and only those: 4 of the telecom runs', none of retail's."""
    assert billed_over_later([5, 9, 7, 8, 7]) == [False, True, False, True, False]
    left = [(name, billed) for name, _, billed in REQUESTS if BILLED_OVER_LATER in name]
    assert len(left) == 4 and all(name.startswith("tau2_gpt-4.1_telecom") for name, _ in left)


def test_anthropic_counts_with_tool_calls_do_not_fall_under_the_providers():
    """bench.usage's 560 recorded Claude requests (the body sent and the input tokens Anthropic
    billed, from public test recordings): a `tool_use` or `tool_result` block bills ~22 tokens
    beyond its text, a message ~8, the tool-use prompt 443-517. Counted with 3 a block and 350 for
    the prompt, 78% of the Claude 3.5+ requests with tools were under the bill (76% by more than
    3%; a recorded loop of 32 calls: 1,707 counted, 3,000 billed). A forced tool (`tool_choice`
    any or tool) bills ~50 tokens more prompt than auto: without that, 38 of its 234 requests
    were under (8% of the family), 5 by more than 3%."""
    engine = Engine(load_policy_set({}))
    ratios = [guard_count(engine, body) / billed for name, body, billed in REQUESTS if name == "claude 3.5+, tools"]
    assert len(ratios) >= 400
    assert sum(r < 0.97 for r in ratios) <= 0.005 * len(ratios)
    assert sum(r < 1.0 for r in ratios) <= 0.02 * len(ratios)
    assert statistics.median(ratios) <= 1.2  # (over-counting cuts history that would have fit)


def test_a_long_claude_agent_sessions_counts_stay_just_over_the_providers():
    """bench.usage's pi session (session 53): 439 requests of one coding-agent session with Claude
    Sonnet 4.5, 1.7k to 177k tokens, each rebuilt as the agent sent it (its own system prompt and
    tool schemas) beside the input Anthropic billed for it: the guard's count is never under the
    bill and at most 1.10x (median 1.058; `litellm.token_counter` counts 0.60-0.94x of it)."""
    engine = Engine(load_policy_set({}))
    ratios = [guard_count(engine, body) / billed for name, body, billed in REQUESTS if name == "pi_large-session"]
    assert len(ratios) >= 400
    assert min(ratios) >= 1.0 and max(ratios) <= 1.11
    assert statistics.median(ratios) <= 1.07


def test_responses_instructions_count_as_the_system_message_they_are_sent_as():
    """bench.usage's recorded Responses requests of gpt-4o and gpt-4.1 with instructions and no tools:
    counted as their framing and text, 24 of 28 were billed one token more (a system message's
    role); counted as the message they are sent as, at most one in ten is under the bill."""
    engine = Engine(load_policy_set({}))
    rows = [
        (body, billed)
        for name, body, billed in REQUESTS
        if name == "responses, gpt-4o / gpt-4.1, no tools"
        and isinstance(body.get("instructions"), str)
        and body["instructions"]
    ]
    assert len(rows) >= 20
    under = [billed - guard_count(engine, body) for body, billed in rows if guard_count(engine, body) < billed]
    assert len(under) <= 0.1 * len(rows), under


def test_responses_items_that_load_tools_count_as_the_tools_they_load():
    """bench.usage's recorded gpt-5 and gpt-5.6 Responses requests with an `additional_tools` item
    (one strict function loaded mid-conversation): counted as the item's JSON, each was 14-34%
    under the bill (the item billed 110-125 tokens, its JSON 62-68). Counted as the tools rendered
    plus the item's preamble, none is under."""
    engine = Engine(load_policy_set({}))
    rows = [
        (body, billed)
        for name, body, billed in REQUESTS
        if name.startswith("responses") and "additional_tools" in str(body["input"])
    ]
    assert len(rows) >= 5
    ratios = [guard_count(engine, body) / billed for body, billed in rows]
    assert 1.0 <= min(ratios) and max(ratios) <= 1.1, ratios


def test_chat_bodies_for_claude_count_as_the_messages_requests_they_go_out_as():
    """A chat completions body for a Claude model goes out as a Messages request (LiteLLM
    translates it): content blocks and a tool-use prompt its chat framing does not hold. bench.usage's
    recorded Claude requests with tools, translated to chat by LiteLLM's own adapter and counted
    with OpenAI's framing: every one under the bill (median 0.45x). With Anthropic's: at most 1%."""
    import copy

    from litellm.llms.anthropic.pass_through.adapters.transformation import LiteLLMAnthropicMessagesAdapter

    from guard.dialects import OPENAI

    adapter = LiteLLMAnthropicMessagesAdapter()
    engine = Engine(load_policy_set({}))
    counter, _ = engine.counter_for("claude-sonnet-4-5", engine.policy_for("claude-sonnet-4-5"))
    ratios = []
    for name, body, billed in REQUESTS:
        if name == "claude 3.5+, tools":
            chat, _ = adapter.translate_anthropic_to_openai(copy.deepcopy(body))
            ratios.append(counter.body(OPENAI, dict(chat)) / billed)
    assert len(ratios) >= 400
    assert sum(r < 1.0 for r in ratios) <= 0.01 * len(ratios)
    assert statistics.median(ratios) <= 1.35  # (over-counting cuts history that would have fit)
    # an OpenAI-compatible server gets the chat body as it is: its own framing, not Anthropic's
    proxied, _ = engine.counter_for("openai/claude-sonnet-4-5", engine.policy_for("claude-sonnet-4-5"))
    assert proxied.renders == "generic" and counter.renders == "anthropic"


def test_a_codex_sessions_counts_sit_at_the_providers_request_after_request():
    """bench.usage's real Codex session (gpt-5.5, Responses API, 66 requests with the input tokens
    OpenAI billed; tool schemas not logged: the first request's difference is added to every
    count). Its 25 reasoning items were counted as their JSON (the sealed base64: ~650 + 4.4
    tokens a reasoning token, billed ~7 + 0.94), its 102 calls without their ids (~18 tokens a
    call billed) and its three web searches without the pages they read (2-6k tokens billed on
    every later request): 1.000-1.129x, drifting with the session. Now within 1% of the bill on
    every request but the three whose own response searched (nobody sees those pages before)."""
    engine = Engine(load_policy_set({}))
    rows = [(name, body, billed) for name, body, billed in REQUESTS if name.startswith("codex_gpt-5.5")]
    assert len(rows) == 66 and UNLOGGED_TOOLS in rows[0][0] and SEARCHED not in rows[0][0]
    tools = rows[0][2] - guard_count(engine, rows[0][1])
    ratios = [(guard_count(engine, body) + tools) / billed for name, body, billed in rows if SEARCHED not in name]
    assert len(ratios) == 63
    assert 0.99 <= min(ratios) and max(ratios) <= 1.01


@pytest.mark.parametrize("session", ["claudecode_196820da", "claudecode_624a4a58"])
def test_a_claude_code_sessions_counts_do_not_fall_under_the_providers(session):
    """bench.usage's two real Claude Code sessions (Claude Sonnet 4.5, 46 and 37 requests of 28k-156k
    tokens with the input Anthropic billed for each, up to the session's own compaction; system
    prompt and tool schemas not logged: the first request's difference is added to every count).
    The guard's estimate (cl100k_base x 1.25) sits at 0.97-1.08x the bill; `litellm.token_counter`
    at 0.83-1.0x."""
    engine = Engine(load_policy_set({}))
    rows = [(body, billed) for name, body, billed in REQUESTS if name.startswith(session + ",")]
    assert len(rows) >= 37
    tools = rows[0][1] - guard_count(engine, rows[0][0])
    ratios = [(guard_count(engine, body) + tools) / billed for body, billed in rows]
    assert min(ratios) >= 0.97 and max(ratios) <= 1.10


IMAGE_REQUESTS = image_requests()


def test_recorded_image_requests_are_counted_as_billed():
    """bench.usage's 205 recorded requests with images (the input tokens OpenAI, Anthropic and Gemini
    billed for each; the images blank PNGs of the recorded sizes): every OpenAI and Gemini model
    counts its images by its own formula, so no row's median is more than 1% under the bills and
    at most one request in ten is more than 3% under (a recording whose bill its twins do not share).
    Before, with GPT-4o's tiles for every OpenAI model and Claude's w*h/750 for Gemini: GPT-4o mini's
    requests counted at 0.03-0.05 of their bills, o4-mini's at 0.83-0.87, GPT-4.1 nano's at 0.85,
    Gemini 3's images at a median of 0.41 and Gemini 2.0's at 0.33; gpt-5-mini's with a tool, its
    images by patches, at 0.79-0.90 (a reasoning model's chat tool preamble)."""
    rows: dict[str, list[float]] = {}
    for name, _, billed, ours in IMAGE_REQUESTS:
        rows.setdefault(name, []).append(ours / billed)
    assert sum(map(len, rows.values())) >= 200
    for name, ratios in rows.items():
        if "anthropic" in name:
            continue
        assert statistics.median(ratios) >= 0.99, (name, ratios)
        assert sum(r < 0.97 for r in ratios) <= 0.1 * len(ratios), (name, ratios)
    assert statistics.median(rows["images: anthropic, anthropic"]) >= 1.0
    mini = rows["images: openai-chat, openai-4o-mini"]
    assert len(mini) >= 10 and min(mini) >= 1.0  # (the bills match the 2,833 + 5,667 tiles exactly)


def test_the_formulas_before_under_counted_the_recorded_image_requests():
    """The same requests counted with the formulas the guard used before: 85 + 170 tiles for every
    OpenAI model, and for Gemini Claude's (today's, never less than the w*h/750 it was): GPT-4o
    mini's and Gemini 2.0's far under the bill (the test above can fail)."""
    from guard.core.images import image_part_tokens

    engine = Engine(load_policy_set({}))
    shared = engine.counter_for("gpt-4o", engine.policy_for("gpt-4o"))[0]
    old = TokenCounter(shared.encoding, image_formula="openai", tool_framing="openai")
    mini = [
        old.body(by_name("openai"), body) / billed
        for name, body, billed, _ in IMAGE_REQUESTS
        if name == "images: openai-chat, openai-4o-mini"
    ]
    assert mini and max(mini) < 0.05
    tiles = [
        sum(image_part_tokens(p, "anthropic") for p in body["messages"][0]["content"]) / billed
        for name, body, billed, _ in IMAGE_REQUESTS
        if name == "images: gemini, gemini-tiles"
    ]
    assert tiles and statistics.median(tiles) < 0.9
