"""Tool schemas as OpenAI's models read them: function tools rendered into the TypeScript-like
namespace OpenAI puts before the conversation, so a count of the rendering is what the provider
bills. Pure: no I/O, no LiteLLM.

    # Tools

    ## functions

    namespace functions {

    // Finds a customer by their phone number.
    type get_customer = (_: {
    // The phone number to search for.
    phone_number: string, // Phone Number
    limit?: number, // Limit
    }) => any;

    } // namespace functions

Measured against the provider's own count on 281 real gpt-4.1 requests with 13 and 15 tool
schemas (`bench.usage`): this rendering counts exactly the billed tools' share of both agents'
requests once `OPENAI_TOOLS_FRAMING` is added (the compact JSON the guard counted before was
1.32-1.43x it). A nested parameter's description is a comment at its own depth too: three
GitHub Copilot Chat requests with 36 schemas (objects and arrays of objects among their
parameters) counted 0.989x their bills without them, 1.000x with. A schema with parts the
rendering cannot speak for (`$ref`, `allOf`, ...) is left to the caller, who counts it as JSON
(an over-count, the safe side)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# the tokens OpenAI adds around the rendered functions, per request: measured, the same 13 for
# both agents of bench.usage (15 and 13 functions, 38 and 24 parameters)
OPENAI_TOOLS_FRAMING = 13
# what an OpenAI reasoning model (GPT-5, o-series) bills on chat completions for having tools at all,
# beyond their rendering: 60-69 tokens on 15 recorded gpt-5-mini requests with one tool, where its
# requests without tools were billed as counted (bench.usage's image rows); the Responses API's
# framing of the same requests is counted over their bills already
REASONING_TOOLS_PREAMBLE = 69

_UNRENDERED = ("$ref", "allOf", "not", "if", "patternProperties")
_SCALARS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean", "null": "null"}


def function_of(tool: Any) -> tuple[str, str, Mapping[str, Any]] | None:
    """(name, description, parameters) of a function tool in any of the shapes a body carries
    (chat `{"type": "function", "function": {...}}`, Responses `{"type": "function", "name": ...}`,
    Anthropic `{"name", "input_schema"}`), or None for a tool of another kind (or no object)."""
    if not isinstance(tool, Mapping):
        return None
    inner = tool.get("function") if tool.get("type") == "function" and "function" in tool else tool
    if not isinstance(inner, Mapping):
        return None
    name = inner.get("name")
    if tool.get("type") not in (None, "function") or not isinstance(name, str):
        return None
    params = inner.get("parameters", inner.get("input_schema")) or {}
    description = inner.get("description") or ""
    if not isinstance(params, Mapping) or not isinstance(description, str):
        return None
    return name, description, params


def render_functions(functions: Sequence[tuple[str, str, Mapping[str, Any]]]) -> str | None:
    """The namespace OpenAI renders the functions into, or None where a schema holds a part the
    rendering cannot speak for."""
    lines = ["# Tools", "", "## functions", "", "namespace functions {", ""]
    for name, description, params in functions:
        lines += [f"// {line}" for line in description.split("\n")] if description else []
        props = params.get("properties")
        if props:
            body = _object(params, 0)
            if body is None:
                return None
            lines += [f"type {name} = (_: {{", body, "}) => any;"]
        else:
            lines.append(f"type {name} = () => any;")
        lines.append("")
    lines.append("} // namespace functions")
    return "\n".join(lines)


def _object(schema: Mapping[str, Any], indent: int) -> str | None:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return None
    required = schema.get("required") or []
    lines = []
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            return None
        kind = _type(prop, indent)
        if kind is None:
            return None
        description = prop.get("description")
        if isinstance(description, str) and description:
            lines += [f"// {line}" for line in description.split("\n")]
        title = prop.get("title")
        note = f" // {title}" if isinstance(title, str) and title else ""
        lines.append(f"{name}{'' if name in required else '?'}: {kind},{note}")
    pad = " " * indent
    return "\n".join(pad + line for line in lines)


def _type(schema: Mapping[str, Any], indent: int) -> str | None:
    if any(key in schema for key in _UNRENDERED):
        return None
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"])
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        kinds = [_type(o, indent) if isinstance(o, Mapping) else None for o in options]
        return None if None in kinds else " | ".join(k for k in kinds if k is not None)
    kind = schema.get("type")
    if isinstance(kind, list):
        parts = [_type({**schema, "type": k}, indent) for k in kind]
        return None if None in parts else " | ".join(p for p in parts if p is not None)
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return "any[]"
        inner = _type(items, indent)
        return None if inner is None else f"{inner}[]"
    if kind == "object" or "properties" in schema:
        if not schema.get("properties"):
            return "object"
        body = _object(schema, indent + 2)
        return None if body is None else "{\n" + body + "\n" + " " * indent + "}"
    return "any" if kind is None else None
