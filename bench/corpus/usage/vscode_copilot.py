"""GitHub Copilot Chat (VS Code) requests with the provider's count of each. VS Code's "Export Chat
Replay" (`*.chatreplay.json`) logs, per model call, the messages it sent (`requestMessages`: roles
0-3 for system, user, assistant and tool; text parts, cache breakpoints, the assistant's thinking
and stateful markers), the tool schemas (`metadata.tools`), the API it went through
(`metadata.requestType`) and the usage the provider returned (`metadata.usage.prompt_tokens`, cached
tokens included). Each request is rebuilt as the body of that API holding every message logged for
it:

- `ChatResponses` (GPT-5.x): a Responses request, the system and user messages as input messages,
  each assistant call a `function_call` item (its text, where it has one, an assistant message
  before it), each tool message a `function_call_output`. Copilot sends the stateful marker as
  `previous_response_id` (the provider keeps the earlier turns); the provider counts the whole
  context either way, so the request is rebuilt stateless.
- `ChatMessages` (Claude): an Anthropic Messages request, the system message as `system`, user
  texts and tool results (`tool_result` blocks) in user messages, each assistant message's
  thinking (with its signature), text and `tool_use` blocks.
- `ChatCompletions`: a chat completions request, as logged.

    python bench/corpus/usage/vscode_copilot.py REPLAY.chatreplay.json --source "owner/repo COMMIT path" --tag NAME [--out DIR]

Writes `vscode-copilot_<NAME>.json.gz`: a `requests` list of `{"body", "billed", "row"}` (bench.usage's
recorded-requests form; `row`, the request's row in the bench: the model, and whether it has tools).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from convert import replay_text, replay_tools, write_gz  # noqa: E402  (bench/corpus/agents/convert.py)

ROLES = {0: "system", 1: "user", 2: "assistant", 3: "tool"}


def items_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's logged messages as Responses API input items."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role, text = ROLES[m["role"]], replay_text(m)
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["toolCallId"], "output": text})
        elif role == "assistant":
            if text:
                items.append({"role": "assistant", "content": text})
            for call in m.get("toolCalls") or []:
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function["arguments"],
                    }
                )
        else:
            items.append({"role": role, "content": text})
    return items


def anthropic_of(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """A request's logged messages as an Anthropic Messages request's system prompt and messages
    (a role's consecutive messages one message of blocks, as the API takes them)."""
    system, out = None, []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        role, text = ROLES[m["role"]], replay_text(m)
        if role == "system":
            system = text
        elif role == "user":
            add("user", [{"type": "text", "text": text}])
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m["toolCallId"], "content": text}])
        else:
            blocks = []
            for part in m.get("content") or []:
                value = part.get("value") if part.get("type") == 2 else None
                if isinstance(value, dict) and value.get("type") == "thinking":
                    thinking = value["thinking"]
                    blocks.append(
                        {
                            "type": "thinking",
                            "thinking": thinking.get("text", ""),
                            "signature": thinking.get("encrypted", ""),
                        }
                    )
            if text:
                blocks.append({"type": "text", "text": text})
            for call in m.get("toolCalls") or []:
                function = call["function"]
                arguments = json.loads(function["arguments"] or "{}")
                blocks.append({"type": "tool_use", "id": call["id"], "name": function["name"], "input": arguments})
            add("assistant", blocks)
    return system, out


def chat_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's logged messages as chat completions messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role, text = ROLES[m["role"]], replay_text(m)
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": m["toolCallId"], "content": text})
        elif role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if m.get("toolCalls"):
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": c["function"]} for c in m["toolCalls"]
                ]
            out.append(message)
        else:
            out.append({"role": role, "content": text})
    return out


def body_of(kind: str, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request of API `kind` (`metadata.requestType`) holding `messages` and `tools`."""
    if kind == "ChatResponses":
        responses_tools = [
            {"type": "function", **{k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}}
            for t in tools
        ]
        return {"model": model, "input": items_of(messages), "tools": responses_tools}
    if kind == "ChatMessages":
        system, turns = anthropic_of(messages)
        anthropic_tools = [
            {
                "name": t["name"],
                "description": t.get("description", ""),
                "input_schema": t.get("input_schema") or t.get("parameters") or {"type": "object"},
            }
            for t in tools
        ]
        return {"model": model, **({"system": system} if system else {}), "messages": turns, "tools": anthropic_tools}
    chat_tools = replay_tools(tools)
    return {"model": model, "messages": chat_of(messages), **({"tools": chat_tools} if chat_tools else {})}


def requests_of(replay: dict[str, Any]) -> list[dict[str, Any]]:
    """Every logged request that the provider answered with its usage, with its row's name."""
    out = []
    for prompt in replay["prompts"]:
        for log in prompt["logs"]:
            meta = log.get("metadata") or {}
            if log.get("kind") != "request" or not (meta.get("usage") or {}).get("prompt_tokens"):
                continue
            tools = meta.get("tools") or []
            body = body_of(meta.get("requestType", ""), meta["model"], log["requestMessages"]["messages"], tools)
            row = f"vscode copilot chat, {meta['model']}, {'tools' if tools else 'no tools'}"
            out.append({"body": body, "billed": meta["usage"]["prompt_tokens"], "row": row})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("replay", type=Path)
    parser.add_argument("--source", required=True, help="where REPLAY came from (repository, commit, path)")
    parser.add_argument("--tag", required=True, help="the output's name: vscode-copilot_TAG.json.gz")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    requests = requests_of(json.loads(args.replay.read_text()))
    data = {
        "x_source": args.source,
        "about": "GitHub Copilot Chat in VS Code: requests as its chat replay export logs them, each with "
        "the prompt tokens the provider reported (see vscode_copilot.py)",
        "requests": requests,
    }
    target = args.out / f"vscode-copilot_{args.tag}.json.gz"
    write_gz(target, data)
    print(target, len(requests), "requests")


if __name__ == "__main__":
    main()
