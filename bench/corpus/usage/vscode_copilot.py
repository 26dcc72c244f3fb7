"""GitHub Copilot Chat (VS Code's agent mode) requests with the provider's count of each. VS Code's
"Export Chat Replay" (`*.chatreplay.json`) logs, per model call, the messages it sent
(`requestMessages`: roles 0-3 for system, user, assistant and tool; text parts, cache breakpoints,
and the assistant's `stateful_marker`s), the tool schemas (`metadata.tools`) and the usage the
provider returned (`metadata.usage.prompt_tokens`). Copilot sends GPT-5.x through the Responses API
with the marker as `previous_response_id` (the provider keeps the earlier turns); the provider counts
the whole context either way, so each request is rebuilt as the stateless Responses request holding
every message logged for it: the system message and user messages as input messages, each assistant
call a `function_call` item (its text, where it has one, an assistant message before it) and each
tool message a `function_call_output`, with the logged tool schemas.

    python bench/corpus/usage/vscode_copilot.py REPLAY.chatreplay.json --source "owner/repo COMMIT path" [--out DIR]

Writes `vscode-copilot_<model>.json.gz`: a `requests` list of `{"body", "billed"}` (bench.usage's
recorded-requests form) and `row`, the name of its row in the bench.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from convert import replay_text, write_gz  # noqa: E402  (bench/corpus/agents/convert.py)

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


def tool_of(schema: dict[str, Any]) -> dict[str, Any]:
    """A logged tool schema as a Responses API function tool."""
    return {
        "type": "function",
        **{k: schema[k] for k in ("name", "description", "parameters", "strict") if k in schema},
    }


def requests_of(replay: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The model and every logged request that the provider answered with its usage."""
    model, out = "", []
    for prompt in replay["prompts"]:
        for log in prompt["logs"]:
            meta = log.get("metadata") or {}
            if log.get("kind") != "request" or not (meta.get("usage") or {}).get("prompt_tokens"):
                continue
            model = meta["model"]
            body = {
                "model": model,
                "input": items_of(log["requestMessages"]["messages"]),
                "tools": [tool_of(t) for t in meta.get("tools") or []],
            }
            out.append({"body": body, "billed": meta["usage"]["prompt_tokens"]})
    return model, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("replay", type=Path)
    parser.add_argument("--source", required=True, help="where REPLAY came from (repository, commit, path)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    model, requests = requests_of(json.loads(args.replay.read_text()))
    tools = len(requests[0]["body"]["tools"]) if requests else 0
    data = {
        "x_source": args.source,
        "about": "GitHub Copilot Chat's agent mode in VS Code: requests as its chat replay export logs them, "
        "each with the prompt tokens the provider reported (see vscode_copilot.py)",
        "row": f"vscode copilot chat, {model}, {tools} tools",
        "requests": requests,
    }
    target = args.out / f"vscode-copilot_{model}.json.gz"
    write_gz(target, data)
    print(target, len(requests), "requests")


if __name__ == "__main__":
    main()
