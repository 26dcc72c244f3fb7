"""OpenAI Responses API bodies (`/v1/responses`, `litellm.aresponses`).

The turns are the `input` items: messages (`input_text` / `input_image` / `input_file` parts, or a
string), `function_call` and `function_call_output` paired by `call_id` (likewise custom and
built-in tool calls), `reasoning` items, and opaque ones (`item_reference`, `compaction`, ...). A
string `input` is one user message. `instructions` is pinned like a system prompt; `tools`, `text`
(its `format` schema) and `prompt` are counted as sent. The output limit is `max_output_tokens`.

A `reasoning` item belongs to the item that follows it (the provider refuses one without the
other), so both share a group: they are dropped or summarized together, and never edited; its
sealed content counts as the reasoning it stands for (`SEALED_FIXED_BYTES`). An item that loads
tools (`additional_tools`) counts as those tools rendered (`LOADED_TOOLS_PROMPT`). Other opaque
items are counted as their JSON; all are only ever dropped or summarized with their group.

With `previous_response_id` or `conversation` the provider prepends history it holds; with a
stored `prompt` it adds the prompt's text. The guard counts what the body carries and names those
fields in the report (`unseen_state`): its count is then a lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from guard.core.content import Content, Message, compact_json, text_of
from guard.core.errors import BadRequest
from guard.core.images import image_part_tokens
from guard.core.tokens import TokenCounter
from guard.dialects import messages
from guard.dialects.base import (
    TOOL_CALL_FRAMING,
    Dialect,
    count_content,
    count_tools,
    counts_blocks,
    image_block,
    inline_file_tokens,
    text_block,
)

ITEM_FRAMING = 3
# A `reasoning` item's `encrypted_content` is the model's own reasoning, sealed (the base64 of a
# Fernet token): the provider bills the reasoning tokens, not the base64. A real Codex session
# (gpt-5.5, 66 requests with the provider's count, bench.usage): an item billed ~7 + 0.94 tokens a
# reasoning token, its payload ~700 bytes + ~4.8 bytes a reasoning token, while its JSON encodes to
# ~650 + 4.4 tokens a reasoning token (8-45x the bill). The payload's bytes past the first 600, a
# token every 4, stay above the bill on every item measured (by 23-73 tokens, against the fitted rate).
SEALED_FIXED_BYTES = 600
SEALED_BYTES_PER_TOKEN = 4
# A `web_search_call` item stands for the pages the provider's search read: they stay in the context
# (billed on every later request) but not in the item. The Codex session's three searches added
# 4,068, 6,055 and 2,159 tokens to every later request's bill.
SEARCH_RESULTS_TOKENS = 4096
# An item that loads tool definitions mid-conversation (`additional_tools`; a tool search's
# `tool_search_output`) is rendered as the request's own tools are, plus a preamble of its own. Six
# recorded gpt-5 and gpt-5.6 requests loading one strict function (bench.usage): the item billed
# 110-125 tokens, 62-72 beyond the function rendered as tools (48-53) and the item's framing and
# role; its JSON counts 62-68. The preamble is the largest seen, so none of the six is under-counted.
LOADED_TOOLS_PROMPT = 68
RESULT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})  # outputs the strategies may edit
# the calls whose arguments the last resort may shorten once answered, and the key holding them
_ARGUMENTS = {"function_call": "arguments", "custom_tool_call": "input"}
UNSEEN_STATE = ("previous_response_id", "conversation", "prompt")


def _kind(item: Message) -> str:
    kind = item.get("type")
    return kind if isinstance(kind, str) else "message"


def _is_call(item: Message) -> bool:
    kind = _kind(item)
    return kind.endswith("_call") and item.get("call_id") is not None


def _is_output(item: Message) -> bool:
    return _kind(item).endswith("_call_output") and item.get("call_id") is not None


class Responses(Dialect):
    name: ClassVar[str] = "responses"
    messages_key: ClassVar[str] = "input"
    fixed_keys: ClassVar[tuple[str, ...]] = ("tools", "tool_choice", "instructions", "text", "prompt")
    system_keys: ClassVar[tuple[str, ...]] = ("instructions",)

    def messages(self, body: Mapping[str, Any]) -> list[Message]:
        items = body.get("input")
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        if not isinstance(items, list):
            raise BadRequest("'input' must be a string or a list of items")
        for i, item in enumerate(items):
            if type(item) is not dict and not isinstance(item, Mapping):
                raise BadRequest(f"input[{i}] must be an object")
            kind = item.get("type")
            if kind is not None and not isinstance(kind, str):
                raise BadRequest(f"input[{i}].type must be a string")
            if _kind(item) == "message":
                if not isinstance(item.get("role"), str):
                    raise BadRequest(f"input[{i}].role must be a string")
                content = item.get("content")
                if content is not None and type(content) is not str and type(content) is not list:
                    raise BadRequest(f"input[{i}].content must be a string or a list of parts")
            elif _kind(item) in RESULT_TYPES:
                output = item.get("output")
                if output is not None and type(output) is not str and type(output) is not list:
                    raise BadRequest(f"input[{i}].output must be a string or a list of parts")
        return items

    def output_key(self, body: Mapping[str, Any], model: str) -> str:
        return "max_output_tokens"

    def unseen_state(self, body: Mapping[str, Any]) -> list[str]:
        return [key for key in UNSEEN_STATE if body.get(key)]

    def is_system(self, msg: Message) -> bool:
        return _kind(msg) == "message" and msg.get("role") in ("system", "developer")

    def is_user_turn(self, msg: Message) -> bool:
        return _kind(msg) == "message" and msg.get("role") == "user"

    def is_reply(self, msg: Message) -> bool:
        kind = _kind(msg)
        return msg.get("role") == "assistant" if kind == "message" else kind == "reasoning" or _is_call(msg)

    def tool_call_ids(self, msg: Message) -> list[str]:
        return [str(msg["call_id"])] if _is_call(msg) else []

    def call_arguments(self, msg: Message) -> list[tuple[int | None, str, str]]:
        """A `function_call`'s `arguments` (JSON text), a `custom_tool_call`'s `input` (free text)."""
        key = _ARGUMENTS.get(_kind(msg))
        text = msg.get(key) if key else None
        return [(None, str(msg.get("call_id")), text)] if isinstance(text, str) else []

    def with_call_arguments(self, msg: Message, slot: int | None, text: str) -> dict[str, Any] | None:
        return {**msg, _ARGUMENTS[_kind(msg)]: text}

    def tool_result_ids(self, msg: Message) -> list[str]:
        return [str(msg["call_id"])] if _is_output(msg) else []

    def tool_results(self, msg: Message) -> list[tuple[int | None, Content]]:
        if _kind(msg) in RESULT_TYPES:
            return [(None, msg.get("output"))]
        return []

    def with_tool_result(self, msg: Message, slot: int | None, content: Content) -> dict[str, Any]:
        new = dict(msg)
        new["output"] = content
        return new

    def marker(self, text: str, cache_control: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    def groups(self, messages: Sequence[Message]) -> list[int]:
        """A reasoning item joins the item after it; calls that follow one another (parallel
        calls) share a group, and each output joins the group of its call."""
        groups: list[int] = []
        gid = -1
        open_calls: set[str] = set()
        after_reasoning = after_call = False
        for item in messages:
            call = _is_call(item)
            joins = (
                after_reasoning
                or (_is_output(item) and str(item.get("call_id")) in open_calls)
                or (call and after_call)
            )
            if not joins:
                gid += 1
                open_calls = set()
            groups.append(gid)
            if call:
                open_calls.add(str(item["call_id"]))
            after_reasoning = _kind(item) == "reasoning"
            after_call = call
        return groups

    def count(self, counter: TokenCounter, msg: Message) -> tuple[int, int]:
        return _item_tokens(counter, msg)

    def count_fixed(self, counter: TokenCounter, body: Mapping[str, Any]) -> tuple[int, int]:
        text, img = super().count_fixed(counter, body)  # tools, tool_choice, text, prompt
        # the tool-use prompt Anthropic adds (a forced tool's, for "required" or a named function)
        choice = body.get("tool_choice")
        forced = choice == "required" or (isinstance(choice, Mapping) and "name" in choice)
        text += messages.sent_on_tool_prompt(counter, body.get("tools"), forced)
        instructions = body.get("instructions")
        if isinstance(instructions, str):
            # sent as a system message: its framing, its role and its text (304 recorded requests:
            # with instructions, gpt-4o and gpt-4.1 billed one token more than the text and framing)
            framing = messages.MESSAGE_FRAMING if counter.renders == "anthropic" else ITEM_FRAMING
            text += framing + counter.raw("system") + counter.raw(instructions)
        elif isinstance(instructions, list):
            for item in instructions:
                if isinstance(item, Mapping):
                    t, i = self.count(counter, item)
                    text, img = text + t, img + i
        return text, img

    def line(self, msg: Message) -> str:
        kind = _kind(msg)
        if kind == "message":
            return f"[{msg.get('role')}] " + text_of(msg.get("content"))
        if kind in RESULT_TYPES:
            return f"[tool result {msg.get('call_id')}] " + text_of(msg.get("output"))
        if kind in ("function_call", "custom_tool_call"):
            args = msg.get("arguments", msg.get("input"))
            return f"[assistant] (calls tool {msg.get('name')} with {args})"
        if kind == "reasoning":
            summary = msg.get("summary")
            texts = [p.get("text", "") for p in summary if isinstance(p, Mapping)] if isinstance(summary, list) else []
            return "[assistant reasoning] " + "\n".join(str(t) for t in texts)
        return f"[{kind}]"


def _item_tokens(counter: TokenCounter, msg: Message) -> tuple[int, int]:
    """OpenAI's framing of each item; where the model's provider gets the body as an Anthropic
    Messages request (`TokenCounter.renders`: LiteLLM turns the items into chat messages, then
    into Messages), Anthropic's: a message's framing, a `tool_use` block's for a call and a
    `tool_result` block's, in a message of its own, for an output."""
    kind = _kind(msg)
    anthropic = counter.renders == "anthropic"
    framing = messages.MESSAGE_FRAMING if anthropic else ITEM_FRAMING
    if kind == "message":
        t, img = count_content(counter, msg.get("content"))
        return framing + counter.raw(str(msg.get("role"))) + t, img
    if kind in RESULT_TYPES:
        t, img = count_content(counter, msg.get("output"))
        return framing + (messages.TOOL_BLOCK_FRAMING if anthropic else 0) + t, img
    if kind in ("function_call", "custom_tool_call"):
        # the call's id is billed too (the Codex session: ~19.6 tokens a call beyond its name
        # and input, with ids of ~18 tokens; recorded gpt-5 requests with 4-token ids: 1)
        fields = ("name", "arguments", "input", "call_id")
        # (Anthropic: a `tool_use` block in an assistant message, counted for each call: parallel
        # calls share one, so theirs is an over-count)
        framing = TOOL_CALL_FRAMING
        if anthropic:
            framing = messages.MESSAGE_FRAMING + counter.raw("assistant") + messages.TOOL_BLOCK_FRAMING
        return framing + sum(counter.field(msg.get(f)) for f in fields), 0
    if kind == "reasoning":
        return ITEM_FRAMING + _reasoning(counter, msg), 0
    tools = msg.get("tools")
    if isinstance(tools, list):  # tool definitions loaded mid-conversation
        role = counter.raw(str(msg.get("role", "developer")))
        return ITEM_FRAMING + role + LOADED_TOOLS_PROMPT + count_tools(counter, tools), 0
    if kind in _IMAGE_ITEMS:
        return _image_item(counter, msg, _IMAGE_ITEMS[kind])
    # built-in tool calls, references, compaction: counted as their JSON, which is never less
    # than what the provider renders of them (a web search with the pages it read, too)
    pages = SEARCH_RESULTS_TOKENS if kind == "web_search_call" else 0
    return ITEM_FRAMING + pages + counter.raw(compact_json(msg)), 0


def _reasoning(counter: TokenCounter, item: Message) -> int:
    """A reasoning item's tokens: its summary and any reasoning text it carries, and its sealed
    reasoning (`encrypted_content`) from the payload's size (see `SEALED_FIXED_BYTES`)."""
    tokens = 0
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list):
            tokens += sum(counter.field(p.get("text")) for p in parts if isinstance(p, Mapping))
    sealed = item.get("encrypted_content")
    if isinstance(sealed, str):
        payload = len(sealed) * 3 // 4  # (base64)
        tokens += -(-max(0, payload - SEALED_FIXED_BYTES) // SEALED_BYTES_PER_TOKEN)
    return tokens


def _input_file(counter: TokenCounter, part: Mapping[str, Any]) -> tuple[int, int]:
    """An `input_file` (see `inline_file_tokens`)."""
    return inline_file_tokens(counter, part), 0


# the items that carry an image as a field of their own, and that field: a computer-use call's
# screenshot (`computer_call_output`'s `output`, a `computer_screenshot`, its `image_url` a data URL
# or its `file_id`), and an image the model made (`image_generation_call`'s `result`, base64)
_IMAGE_ITEMS = {"computer_call_output": "output", "image_generation_call": "result"}


def _image_item(counter: TokenCounter, msg: Message, field: str) -> tuple[int, int]:
    """An item whose `field` is an image: the image by the provider's formula, the rest of the
    item as its JSON (a screenshot's base64 counted as text was ~2,000 times its cost: three
    screenshots of a computer-use loop made a request of 5.4M tokens, 1.8M after every cut,
    refused)."""
    value = msg.get(field)
    if isinstance(value, Mapping) and isinstance(value.get("image_url") or value.get("file_id"), str):
        part: Mapping[str, Any] = {**value, "type": "input_image"}
    elif isinstance(value, str) and field == "result":
        part = {"type": "input_image", "image_url": "data:image/png;base64," + value}
    else:
        return ITEM_FRAMING + counter.raw(compact_json(msg)), 0
    rest = {k: v for k, v in msg.items() if k != field}
    return ITEM_FRAMING + counter.raw(compact_json(rest)), image_part_tokens(part, counter.image_formula)


counts_blocks(
    {"input_text": text_block, "output_text": text_block, "input_image": image_block, "input_file": _input_file}
)
