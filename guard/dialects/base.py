"""The protocol every wire format implements for the core, and the counting of content blocks.

A dialect knows where a body keeps its turns, pinned prompt, tools, tool calls and tool results,
how they pair, how a turn is counted, and how to rebuild a turn with one tool result replaced. It
never mutates its input: every edit returns new (shallow-copied) objects. The counter it is handed
(`guard.core.tokens.TokenCounter`) encodes text and memoises per message; which blocks hold text,
images, files or tool traffic is the dialects' knowledge (`count_content`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from guard.core import toolschema
from guard.core.content import Content, Message, blocks, compact_json
from guard.core.errors import BadRequest
from guard.core.images import image_part_tokens
from guard.core.tokens import TokenCounter

TOOL_SCHEMA_FRAMING = 8  # per tool schema, beside its compact JSON
TOOL_CALL_FRAMING = 3
PDF_PAGE_TOKENS = 3000  # Anthropic: a PDF page costs its text plus an image, ~1.5k-3k tokens
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?!s)")


class Dialect:
    """What one wire format's body is made of, for the core: its list of turns (messages or
    items), the parts pinned outside that list, the tool calls and results inside it and how they
    pair, the key of its output limit, and how each turn is counted and rendered as a transcript
    line. One instance per format (`guard.dialects.OPENAI`, `ANTHROPIC`, `RESPONSES`); the core
    never asks which one it holds."""

    name: ClassVar[str]
    messages_key: ClassVar[str] = "messages"
    # top-level keys counted once per body (tool schemas, formats, pinned prompts): the key of the
    # count memo, and where `count_fixed` looks
    fixed_keys: ClassVar[tuple[str, ...]] = ("tools", "functions", "response_format", "tool_choice")
    # top-level keys that hold a pinned system prompt (reported as "system" in the breakdown)
    system_keys: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"

    # -- body level -------------------------------------------------------------------------
    def messages(self, body: Mapping[str, Any]) -> list[Message]:
        msgs = body.get(self.messages_key)
        if not isinstance(msgs, list):
            raise BadRequest(f"{self.messages_key!r} must be a list")
        for i, m in enumerate(msgs):
            if type(m) is not dict and not isinstance(m, Mapping):
                raise BadRequest(f"messages[{i}] must be an object")
            if not isinstance(m.get("role"), str):
                raise BadRequest(f"messages[{i}].role must be a string")
            content = m.get("content")
            if content is not None and type(content) is not str and type(content) is not list:
                raise BadRequest(f"messages[{i}].content must be a string, a list of parts or null")
        return msgs

    def with_messages(self, body: Mapping[str, Any], messages: Sequence[Message]) -> dict[str, Any]:
        """A copy of body carrying `messages` as its list of turns."""
        out = dict(body)
        out[self.messages_key] = list(messages)
        return out

    def output_key(self, body: Mapping[str, Any], model: str) -> str:
        """The key that carries the output limit: the one the client used, else the native one."""
        raise NotImplementedError

    def unseen_state(self, body: Mapping[str, Any]) -> list[str]:
        """Names of the body's fields that make the provider add input the body does not carry."""
        return []

    # -- message level ----------------------------------------------------------------------
    def is_system(self, msg: Message) -> bool:
        return msg.get("role") in ("system", "developer")

    def is_user_turn(self, msg: Message) -> bool:
        """A message a person wrote (the first and last are pinned)."""
        raise NotImplementedError

    def has_user_text(self, msg: Message) -> bool:
        """Whether a tool-result message also carries words of the user's (Anthropic clients put
        them next to the results). Such a message, when it ends the request, is never dropped:
        its results may only be cut, as the newest turns' are."""
        return False

    def is_reply(self, msg: Message) -> bool:
        """A message the model wrote (its text, calls or reasoning): no request ends with one (the
        client's next words come first)."""
        return msg.get("role") == "assistant"

    def tool_call_ids(self, msg: Message) -> list[str]:
        raise NotImplementedError

    def tool_result_ids(self, msg: Message) -> list[str]:
        raise NotImplementedError

    def tool_results(self, msg: Message) -> list[tuple[int | None, Content]]:
        """(slot, content) of every tool result in the message; slot is a block index or None."""
        raise NotImplementedError

    def call_arguments(self, msg: Message) -> list[tuple[int | None, str, str]]:
        """(slot, call id, arguments as text) of every tool call the message makes whose arguments
        the dialect can rewrite (`with_call_arguments`); slot is a call or block index, or None."""
        return []

    def with_call_arguments(self, msg: Message, slot: int | None, text: str) -> dict[str, Any] | None:
        """A copy of msg whose call at slot has `text` as its arguments; None where the call cannot
        take that text (arguments that must stay a JSON object)."""
        return None

    def with_tool_result(self, msg: Message, slot: int | None, content: Content) -> dict[str, Any]:
        """A copy of msg whose tool result at slot holds content."""
        new = dict(msg)
        if slot is None:
            new["content"] = content
            return new
        parts = list(blocks(msg))
        block = dict(parts[slot])
        block["content"] = content
        parts[slot] = block
        new["content"] = parts
        return new

    def marker(self, text: str, cache_control: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A message the guard inserts; its text always starts with MARKER_PREFIX. With
        `cache_control`, it carries the prompt-cache breakpoint of the messages it stands for."""
        if cache_control is not None:
            return {"role": "user", "content": [{"type": "text", "text": text, "cache_control": dict(cache_control)}]}
        return {"role": "user", "content": text}

    def groups(self, messages: Sequence[Message]) -> list[int]:
        """Group id per message: a tool call and its results share one group; others stand alone.
        A group is cut whole or not at all, so no call loses its result and no result its call."""
        groups: list[int] = []
        gid = -1
        open_calls: set[str] = set()
        for m in messages:
            results = self.tool_result_ids(m)
            if results and open_calls and set(results) & open_calls:
                groups.append(gid)
                continue
            gid += 1
            groups.append(gid)
            open_calls = set(self.tool_call_ids(m))
        return groups

    # -- counting and rendering ---------------------------------------------------------------
    def count(self, counter: TokenCounter, msg: Message) -> tuple[int, int]:
        """(text tokens, image tokens) of one message as the provider renders it."""
        raise NotImplementedError

    def count_fixed(self, counter: TokenCounter, body: Mapping[str, Any]) -> tuple[int, int]:
        """(text tokens, image tokens) of what the body sends outside its list of turns."""
        text = 0
        tools = body.get("tools")
        if isinstance(tools, list):
            text += count_tools(counter, tools)
        for key in self.fixed_keys:
            if key == "tools" or key in self.system_keys:  # a pinned prompt is counted by its dialect
                continue
            value = body.get(key)
            if isinstance(value, (list, Mapping)):
                text += counter.raw(compact_json(value))
        return text, 0

    def line(self, msg: Message) -> str:
        """The message as one transcript line for a summarizer: "[role] text", tool calls and
        results named, images as placeholders."""
        raise NotImplementedError


def count_tools(counter: TokenCounter, tools: list[Any]) -> int:
    """Tokens of a body's tool schemas: where the counter's provider frames function tools its own
    way (OpenAI: a namespace, `guard.core.toolschema`), the rendering of them all plus its framing;
    every other tool, and every tool where a schema holds a part the rendering cannot speak for,
    its compact JSON and a framing allowance."""
    parsed = [(tool, toolschema.function_of(tool)) for tool in tools]
    functions = [f for _, f in parsed if f is not None]
    framed = counter.tool_framing.startswith("openai")  # ("openai-reasoning" too: the same rendering)
    rendered = toolschema.render_functions(functions) if framed and functions else None
    as_json = [tool for tool, f in parsed if rendered is None or f is None]
    json_part = sum(TOOL_SCHEMA_FRAMING + counter.raw(compact_json(tool)) for tool in as_json)
    return json_part if rendered is None else toolschema.OPENAI_TOOLS_FRAMING + counter.raw(rendered) + json_part


# -- content blocks --------------------------------------------------------------------------
def count_content(counter: TokenCounter, value: Any) -> tuple[int, int]:
    """(text, image) tokens of a content value: a string, or a list of parts or blocks (any
    dialect's: a client may mix them, and LiteLLM translates); anything else counts nothing."""
    if isinstance(value, str):
        return counter.raw(value), 0
    if isinstance(value, list):
        return count_parts(counter, value)
    return 0, 0


# how one kind of content block counts: (text, image) tokens, or None to count it as its JSON
BlockCount = Callable[[TokenCounter, Mapping[str, Any]], "tuple[int, int] | None"]
_BLOCKS: dict[str, BlockCount] = {}


def counts_blocks(counts: Mapping[str, BlockCount]) -> None:
    """A dialect names the content blocks it brings and how each counts; each dialect module calls
    this once, on import. A body of one dialect may carry another's blocks (clients mix them and
    LiteLLM translates), so `count_parts` knows them all."""
    _BLOCKS.update(counts)


def count_parts(counter: TokenCounter, parts: list[Any]) -> tuple[int, int]:
    """Text and image tokens of a list of content parts or blocks, of any dialect; a block no
    dialect names (or one whose fields are not the expected kind) counts as its compact JSON."""
    raw = counter.raw
    text = img = 0
    for b in parts:
        if isinstance(b, str):
            text += raw(b)
            continue
        count = _BLOCKS.get(b.get("type")) if isinstance(b, Mapping) else None  # type: ignore[arg-type]
        got = count(counter, b) if count is not None else None
        if got is None:
            text += raw(compact_json(b))
        else:
            text, img = text + got[0], img + got[1]
    return text, img


def field_block(name: str) -> BlockCount:
    """A block counted by one string field (None, so counted as its JSON, if it is not a string)."""

    def count(counter: TokenCounter, block: Mapping[str, Any]) -> tuple[int, int] | None:
        value = block.get(name)
        return (counter.raw(value), 0) if isinstance(value, str) else None

    return count


# a text part: `text` in chat and Anthropic blocks, `input_text` / `output_text` in Responses
text_block = field_block("text")


def image_block(counter: TokenCounter, block: Mapping[str, Any]) -> tuple[int, int] | None:
    """An image, by its provider's formula (`guard.core.images`)."""
    return 0, image_part_tokens(block, counter.image_formula)


def inline_file_tokens(counter: TokenCounter, spec: Mapping[str, Any]) -> int:
    """A file sent by OpenAI's fields (a Responses `input_file`, a chat `file` part's `file`): a
    PDF inline (`file_data`, a data URL) costs its pages; a file by id or URL is counted as its
    JSON (the provider's count of it is unknown here)."""
    data = spec.get("file_data")
    if isinstance(data, str) and data.startswith("data:") and "," in data:
        return document_tokens(counter, {"source": {"type": "base64", "data": data.split(",", 1)[1]}})
    return counter.raw(compact_json(spec))


FILE_REFERENCE = "file_reference"  # (an `unseen_state` name: see `refers_to_files`)


def refers_to_files(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether some part sends a file by reference, not inline: an Anthropic `document` by URL or
    Files API id, a chat `file` part by `file_id`, a Responses `input_file` by `file_id` or
    `file_url` (in a message, an Anthropic tool result or a Responses output). The provider reads
    its pages (a PDF costs 1.5-3k tokens a page) where the guard sees only the reference: its
    count is then a lower bound, named in the report's `unseen_state`."""
    for msg in messages:
        for key in ("content", "output"):
            parts = msg.get(key)
            if isinstance(parts, list) and any(_by_reference(p) for p in parts):
                return True
    return False


def _by_reference(part: Any) -> bool:
    if not isinstance(part, Mapping):
        return False
    kind = part.get("type")
    if kind == "tool_result":
        nested = part.get("content")
        return isinstance(nested, list) and any(_by_reference(p) for p in nested)
    if kind == "document":
        source = part.get("source")
        return isinstance(source, Mapping) and source.get("type") in ("url", "file")
    spec = part.get("file") if kind == "file" else part if kind == "input_file" else None
    return isinstance(spec, Mapping) and not isinstance(spec.get("file_data"), str)


def document_tokens(counter: TokenCounter, block: Mapping[str, Any]) -> int:
    """An Anthropic `document` block (a Responses `input_file` too): a PDF costs its pages, a text
    source its text, anything else its JSON."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return counter.raw(compact_json(block))
    data = source.get("data")
    if source.get("type") == "text" and isinstance(data, str):
        return counter.raw(data)
    if source.get("type") == "base64" and isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=False)
        except (binascii.Error, ValueError):
            return counter.raw(data)
        return PDF_PAGE_TOKENS * max(1, len(_PDF_PAGE.findall(raw)))
    return counter.raw(compact_json(block))
