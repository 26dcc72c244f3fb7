"""Codex CLI sessions with the provider's count of every request they made. A Codex rollout
(`~/.codex/sessions/.../rollout-*.jsonl`) logs every item the session sent or received
(`response_item`) and, after each response, the input tokens OpenAI billed for the request that
made it (`event_msg` `token_count`, `info.last_token_usage.input_tokens`). A request's input is
every item logged before that response's output (its reasoning, messages and calls), so each
request is rebuilt from the log but for its tool schemas, which the log does not hold: the
provider's count minus the guard's on the session's first request is their share (with the
framing of the request), a constant of the session, which `bench.usage` adds to every request's
count. The base instructions are the session's (`session_meta`).

    python bench/corpus/usage/codex.py ROLLOUT.jsonl --source "owner/repo COMMIT path" [--out DIR]

Writes `codex_<model>_<session>.json.gz`: the model, the instructions, the items, and per request
`[items before it, input tokens billed, reasoning tokens of its response, searched]` (`searched`:
its response ran the built-in web search, whose results the provider adds to the context).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from convert import write_gz  # noqa: E402  (bench/corpus/agents/convert.py)

OUTPUT_KINDS = frozenset({"reasoning", "function_call", "custom_tool_call", "web_search_call"})


def is_output(item: dict[str, Any]) -> bool:
    """Whether a logged item is part of a response (the model's) rather than of a request."""
    kind = item.get("type")
    return kind in OUTPUT_KINDS or (kind == "message" and item.get("role") == "assistant")


def session(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The session's model, instructions, items and requests (see the module's docstring)."""
    items: list[dict[str, Any]] = []
    usage: list[list[Any]] = []
    meta: dict[str, Any] = {}
    model = None
    start: int | None = None  # where the response being logged began
    for line in lines:
        kind, payload = line.get("type"), line.get("payload") or {}
        if kind == "session_meta":
            meta = payload
        elif kind == "turn_context":
            model = model or payload.get("model")
        elif kind == "response_item":
            if not is_output(payload):
                start = None
            elif start is None:
                start = len(items)
            items.append(payload)
        elif kind == "event_msg" and payload.get("type") == "token_count" and payload.get("info"):
            last = payload["info"]["last_token_usage"]
            end = len(items) if start is None else start
            output = items[end:]
            searched = any(i.get("type") == "web_search_call" for i in output)
            usage.append([end, last["input_tokens"], last.get("reasoning_output_tokens", 0), searched])
            start = None
    instructions = meta.get("base_instructions")
    if isinstance(instructions, dict):
        instructions = instructions.get("text")
    return {"model": model, "instructions": instructions, "items": items, "usage": usage, "session": meta.get("id")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rollout", type=Path)
    parser.add_argument("--source", required=True, help="where ROLLOUT came from (repository, commit, path)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    lines = [json.loads(line) for line in args.rollout.read_text().splitlines() if line.strip()]
    data = {"x_source": args.source, **session(lines)}
    target = args.out / f"codex_{data['model']}_{str(data['session'])[-8:]}.json.gz"
    write_gz(target, data)
    print(target, len(data["items"]), "items", len(data["usage"]), "requests")


if __name__ == "__main__":
    main()
