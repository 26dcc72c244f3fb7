"""Anthropic /v1/messages bodies: a top-level `system`, `tool_use` blocks in assistant messages
and `tool_result` blocks in the user message that follows; the output limit is `max_tokens`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from guard.core.content import Content, Message, blocks, compact_json, text_of
from guard.core.tokens import TokenCounter
from guard.dialects.base import (
    Dialect,
    count_content,
    count_parts,
    counts_blocks,
    document_tokens,
    field_block,
    image_block,
    text_block,
)

# What Anthropic bills beyond the text, measured on 560 public requests whose recordings hold the
# body and the usage it billed (bench/corpus/usage/anthropic_cassettes.json.gz; in tokens of the
# guard's estimate, before the family's 1.25 factor): ~7 a message, role included; ~18 a
# `tool_use` or `tool_result` block (an agent turn of calls and results: ~36 beyond its text,
# where 3 a block under-counted long tool loops by thousands of tokens); a tool-use system prompt
# of ~355 with `tool_choice` auto and ~415 with a forced tool (documented: 313-346; the schemas'
# own framing is on top, ~16% of their JSON)
MESSAGE_FRAMING = 6
TOOL_BLOCK_FRAMING = 18
TOOL_PROMPT = 450
# a forced tool (`tool_choice` any or tool) bills more prompt than auto: of the 234 such recorded
# requests with tools, 38 were under the bill with TOOL_PROMPT alone (median 1.08x, 5 by over 3%;
# auto's 206: median 1.16x, none under); with this much more, 6 (3.5 Haiku's long loops, each
# within 3%), median 1.10x
FORCED_TOOL_PROMPT = 40


def tool_use_prompt(forced: bool) -> int:
    """The tool-use prompt Anthropic adds to a request with tools (a forced tool's: larger)."""
    return TOOL_PROMPT + (FORCED_TOOL_PROMPT if forced else 0)


def sent_on_tool_prompt(counter: TokenCounter, tools: Any, forced: bool) -> int:
    """The tool-use prompt of an OpenAI-shaped body (chat, Responses) with `tools` where LiteLLM
    sends it on as a Messages request (`TokenCounter.renders`); else none."""
    return tool_use_prompt(forced) if counter.renders == "anthropic" and isinstance(tools, list) and tools else 0


class Messages(Dialect):
    name: ClassVar[str] = "anthropic"
    fixed_keys: ClassVar[tuple[str, ...]] = ("tools", "functions", "response_format", "tool_choice", "system")
    system_keys: ClassVar[tuple[str, ...]] = ("system",)

    def output_key(self, body: Mapping[str, Any], model: str) -> str:
        return "max_tokens"

    def is_user_turn(self, msg: Message) -> bool:
        """A message a person wrote: role user and no tool results.

        Anthropic clients put text next to the tool results it follows in one user message
        (Claude Code appends a system reminder to every tool-result message; a user who interrupts
        adds their words there). Such a message is a tool-result message: its results are cut like
        any other, and its text blocks are never edited (strategies only rewrite tool results), so
        the turn the user really typed stays the pinned "last user turn"."""
        if msg.get("role") != "user":
            return False
        content = msg.get("content")
        if not isinstance(content, list):
            return True
        return not any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)

    def has_user_text(self, msg: Message) -> bool:
        if msg.get("role") != "user" or self.is_user_turn(msg):
            return False
        return any(isinstance(b, Mapping) and b.get("type") == "text" for b in blocks(msg))

    def tool_call_ids(self, msg: Message) -> list[str]:
        if msg.get("role") != "assistant":
            return []
        return [str(b.get("id")) for b in blocks(msg) if isinstance(b, Mapping) and b.get("type") == "tool_use"]

    def call_arguments(self, msg: Message) -> list[tuple[int | None, str, str]]:
        """A `tool_use` block's `input` object as its JSON text."""
        if msg.get("role") != "assistant":
            return []
        return [
            (i, str(b.get("id")), json.dumps(b["input"], ensure_ascii=False))
            for i, b in enumerate(blocks(msg))
            if isinstance(b, Mapping) and b.get("type") == "tool_use" and isinstance(b.get("input"), Mapping)
        ]

    def with_call_arguments(self, msg: Message, slot: int | None, text: str) -> dict[str, Any] | None:
        """The text back as the block's `input`, where it is still a JSON object."""
        try:
            value = json.loads(text)
        except ValueError:
            return None
        if not isinstance(value, dict) or slot is None:
            return None
        parts = list(blocks(msg))
        parts[slot] = {**parts[slot], "input": value}
        return {**msg, "content": parts}

    def tool_result_ids(self, msg: Message) -> list[str]:
        if msg.get("role") != "user":
            return []
        return [
            str(b.get("tool_use_id")) for b in blocks(msg) if isinstance(b, Mapping) and b.get("type") == "tool_result"
        ]

    def tool_results(self, msg: Message) -> list[tuple[int | None, Content]]:
        if msg.get("role") != "user":
            return []
        return [
            (i, b.get("content"))
            for i, b in enumerate(blocks(msg))
            if (type(b) is dict or isinstance(b, Mapping)) and b.get("type") == "tool_result"
        ]

    def groups(self, messages: Sequence[Message]) -> list[int]:
        """A message of tool results joins the calls it answers, and closes them: Anthropic wants
        every `tool_use` answered in the very next message."""
        groups: list[int] = []
        gid = -1
        open_calls = False
        for m in messages:
            if open_calls and self.tool_result_ids(m):
                groups.append(gid)
                open_calls = False
                continue
            gid += 1
            groups.append(gid)
            open_calls = bool(self.tool_call_ids(m))
        return groups

    def count(self, counter: TokenCounter, msg: Message) -> tuple[int, int]:
        text, img = MESSAGE_FRAMING, 0
        role = msg.get("role")
        if isinstance(role, str):
            text += counter.raw(role)
        t, img = count_content(counter, msg.get("content"))
        return text + t, img

    def count_fixed(self, counter: TokenCounter, body: Mapping[str, Any]) -> tuple[int, int]:
        text, img = super().count_fixed(counter, body)
        if isinstance(body.get("tools"), list) and body["tools"]:
            choice = body.get("tool_choice")
            text += tool_use_prompt(isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"))
        system = body.get("system")
        if isinstance(system, (str, list)):
            t, i = count_content(counter, system)
            text, img = text + MESSAGE_FRAMING + t, img + i
        return text, img

    def line(self, msg: Message) -> str:
        role = str(msg.get("role"))
        content = msg.get("content")
        if not isinstance(content, list):
            return f"[{role}] " + text_of(content)
        parts: list[str] = []
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                parts.append(f"(calls tool {block.get('name')} with {compact_json(block.get('input'))})")
            elif kind == "tool_result":
                parts.append(f"[tool result {block.get('tool_use_id')}] " + text_of(block.get("content")))
            elif kind in ("image", "document"):
                parts.append(f"[{kind}]")
        return f"[{role}] " + "\n".join(p for p in parts if p)


# -- its content blocks, as counted ------------------------------------------------------------
def _tool_use(counter: TokenCounter, block: Mapping[str, Any]) -> tuple[int, int]:
    name, arguments = counter.raw(str(block.get("name", ""))), counter.raw(compact_json(block.get("input", {})))
    return TOOL_BLOCK_FRAMING + name + arguments, 0


def _tool_result(counter: TokenCounter, block: Mapping[str, Any]) -> tuple[int, int]:
    inner = block.get("content")
    if isinstance(inner, str):
        return TOOL_BLOCK_FRAMING + counter.raw(inner), 0
    if isinstance(inner, list):
        text, img = count_parts(counter, inner)
        return TOOL_BLOCK_FRAMING + text, img
    return TOOL_BLOCK_FRAMING, 0


counts_blocks(
    {
        "text": text_block,
        "image": image_block,
        "tool_use": _tool_use,
        "tool_result": _tool_result,
        "thinking": field_block("thinking"),
        "redacted_thinking": field_block("data"),
        "document": lambda counter, block: (document_tokens(counter, block), 0),
    }
)
