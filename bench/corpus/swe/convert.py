"""Turn a mini-swe-agent 2.x trajectory (`*.traj.json`, format `mini-swe-agent-1.1`) into the OpenAI
chat body bench.cache replays: `{"model", "tools": [bash], "messages", "x_source"}`, gzipped.

    python bench/corpus/swe/convert.py RAW.traj.json [...] --out bench/corpus/swe

Kept: each message's role, text, tool calls (id, name, arguments) and tool call ids; dropped: the
run's bookkeeping (`extra`: raw model responses, costs, timestamps; `provider_specific_fields`).
The final `exit` record answers the agent's submit call, so it becomes that call's tool result. The
tool schema is mini-swe-agent's bash tool (the trajectory does not store it).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    },
}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def convert(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.get("trajectory_format") != "mini-swe-agent-1.1":
        raise ValueError(f"not a mini-swe-agent 2.x trajectory: {raw.get('trajectory_format')!r}")
    out: list[dict[str, Any]] = []
    exit_text = ""
    for m in raw["messages"]:
        role = m["role"]
        if role == "exit":
            exit_text = _text(m.get("content"))
        elif role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": _text(m.get("content")) or None}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
                    }
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": _text(m.get("content"))})
        else:
            out.append({"role": role, "content": _text(m.get("content"))})
    answered = {m["tool_call_id"] for m in out if m["role"] == "tool"}
    for call in (out[-1].get("tool_calls") or []) if out and out[-1]["role"] == "assistant" else []:
        if call["id"] not in answered:  # the submit call: its answer is the exit record
            out.append({"role": "tool", "tool_call_id": call["id"], "content": exit_text})
    model = raw["info"]["config"]["model"]["model_name"]
    return {"model": model, "tools": [BASH], "messages": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    for path in args.raw:
        raw = json.loads(path.read_text())
        body = convert(raw)
        name = raw.get("instance_id") or path.name.split(".")[0]
        target = args.out / f"{name}.json.gz"
        with gzip.open(target, "wt", encoding="utf-8") as f:
            json.dump(body, f, ensure_ascii=False, separators=(",", ":"))
        print(target, len(body["messages"]), "messages")


if __name__ == "__main__":
    main()
