"""Real requests with the provider's own count of their input: tau2-bench's gpt-4.1 agent runs log
the `usage` OpenAI returned for every agent request, and the requests can be rebuilt exactly (the
agent's view of the conversation, its system prompt and its tool schemas). `bench.usage` counts
them with the guard and with `litellm.token_counter` against those figures.

    python bench/corpus/usage/convert.py RESULTS.json --tools-source tools.py \
        --prompts-source llm_agent.py [--every 3] --out bench/corpus/usage

Tool schemas are rebuilt as tau2 builds them (`tau2.environment.tool.Tool`): each `@is_tool`
method's signature and docstring (parsed with `docstring_parser`, as tau2 does), its parameters a
pydantic model named `parameters` (`model_json_schema()`), its description the docstring's short
description and, when there is one, a blank line and the long one. The source is read with `ast`,
never run; only plain annotations (str, int, float, bool, List[str]) are supported, which is what
the retail and telecom domains use (airline's use its own models: left out).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from convert import prompts_from_source, write_gz  # noqa: E402  (bench/corpus/agents/convert.py)

TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "List[str]": list[str]}


def tool_schemas(source: str) -> list[dict[str, Any]]:
    import docstring_parser
    from pydantic import Field, create_model

    tools = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        marks = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
        if not any(isinstance(d, ast.Name) and d.id == "is_tool" for d in marks):
            continue
        doc = docstring_parser.parse(ast.get_docstring(node, clean=False) or "")
        described = {p.arg_name: p.description for p in doc.params}
        args = node.args.args[1:]
        defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
        fields: dict[str, Any] = {}
        for arg, default in zip(args, defaults):
            value = ... if default is None else ast.literal_eval(default)
            if arg.arg in described:
                value = Field(value, description=described[arg.arg])
            fields[arg.arg] = (TYPES[ast.unparse(arg.annotation)], value)
        params = create_model("parameters", **fields)  # type: ignore[call-overload]
        description = doc.short_description or node.name
        if doc.long_description:
            description += "\n\n" + doc.long_description
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": node.name,
                    "description": description,
                    "parameters": params.model_json_schema(),
                },
            }
        )
    return tools


def agent_view(sim: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """The messages the agent sent (as tau2's `to_litellm_messages` makes them) and, for each agent
    request OpenAI answered, [number of messages before it, the prompt tokens OpenAI counted]."""
    messages: list[dict[str, Any]] = []
    usage: list[list[int]] = []
    for m in sim["messages"]:
        if m["role"] == "assistant":
            if (m.get("usage") or {}).get("prompt_tokens"):
                usage.append([len(messages), m["usage"]["prompt_tokens"]])
            calls = None
            if m.get("tool_calls"):
                calls = [
                    {
                        "id": c["id"],
                        "name": c["name"],
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                        "type": "function",
                    }
                    for c in m["tool_calls"]
                ]
            messages.append({"role": "assistant", "content": m.get("content"), "tool_calls": calls})
        elif m["role"] == "tool" and m.get("requestor", "assistant") == "assistant":
            messages.append({"role": "tool", "content": m.get("content"), "tool_call_id": m["id"]})
        elif m["role"] == "user" and not m.get("tool_calls"):
            messages.append({"role": "user", "content": m.get("content")})
    return messages, usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path)
    parser.add_argument("--tools-source", type=Path, required=True)
    parser.add_argument("--prompts-source", type=Path, required=True)
    parser.add_argument("--every", type=int, default=1, help="keep every n-th simulation")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--source", default=None, help="where RAW came from (repository, commit, path)")
    args = parser.parse_args()
    data = json.loads(args.raw.read_text())
    info = data["info"]
    prompts = prompts_from_source(args.prompts_source.read_text())
    domain = info["environment_info"]["domain_name"]
    body = {
        "x_source": args.source or str(args.raw),
        "model": str(info["agent_info"]["llm"]),
        "system": prompts["SYSTEM_PROMPT"].format(
            agent_instruction=prompts["AGENT_INSTRUCTION"], domain_policy=info["environment_info"]["policy"]
        ),
        "tools": tool_schemas(args.tools_source.read_text()),
        "simulations": [],
    }
    for sim in data["simulations"][:: args.every]:
        messages, usage = agent_view(sim)
        body["simulations"].append({"id": str(sim["id"]), "messages": messages, "usage": usage})
    target = args.out / f"tau2_{body['model']}_{domain}.json.gz"
    write_gz(target, body)
    print(
        target, len(body["simulations"]), "simulations", sum(len(s["usage"]) for s in body["simulations"]), "requests"
    )


if __name__ == "__main__":
    main()
