"""Turn public agent trajectories of several agent families into the request bodies bench.cache
replays (`{"model", "tools", "messages" | "system"+"messages", "x_source"}`, gzipped), one loop a file.

    python bench/corpus/agents/convert.py openhands RAW.jsonl [...]  --out bench/corpus/agents
    python bench/corpus/agents/convert.py sweagent RAW.traj [...]
    python bench/corpus/agents/convert.py moatless RAW/trajectory.json[.gz] [...]
    python bench/corpus/agents/convert.py tau2 RAW.json[.gz] --tools SCHEMAS.json --prompts PROMPTS.json [--pick ID ...]

Each family keeps what its agent sent: the role, text, tool calls (id, name, arguments) and tool
call ids of every message, in order; the run's bookkeeping (costs, timestamps, raw responses) is
dropped. Per family (see README.md beside this file for sources and licences):

- openhands: CodeActAgent `output.jsonl` events, rebuilt as OpenHands' ConversationMemory does
  (system prompt and tools from the `system` event where the run has one; an assistant message per
  model response, from `tool_call_metadata.model_response`; a `tool` message per observation,
  truncated to the run's `max_message_chars` the way OpenHands truncates: head and tail around a
  marker). OpenAI chat bodies.
- sweagent: SWE-agent 1.x `.traj` `history` (OpenAI chat with function calling; text parts joined).
- moatless: Moatless Tools `trajectory.json` (Claude 3.5 Sonnet, Anthropic tool use): the exact
  input of the run's last `build_action` completion plus its response, as an Anthropic messages
  body (system from `agent.system_prompt`). Tool schemas are not stored: each tool gets an object
  schema of the input keys it was called with.
- tau2: tau2-bench simulations (gpt-4.1, OpenAI function calling, parallel calls): the agent's
  view (the user simulator's own tool calls left out), system prompt and tool schemas from the
  producing version's templates.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

MARKER = "\n[... Observation truncated due to length ...]\n"


def _open(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def truncate(text: str, limit: int | None) -> str:
    """OpenHands' truncate_content: the head and the tail around a marker."""
    if not limit or len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + MARKER + text[-half:]


def openhands(run: dict[str, Any], fallback: dict[str, Any] | None = None) -> dict[str, Any]:
    history = run["history"]
    config = run.get("metadata", {}).get("llm_config", {})
    limit = config.get("max_message_chars")
    system = next((e for e in history if e.get("action") == "system"), None)
    if system is None and fallback is not None:
        system = fallback
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    if system is not None:
        messages.append({"role": "system", "content": system["args"]["content"]})
        tools = system["args"].get("tools") or []
    messages.append({"role": "user", "content": run["instruction"]})
    seen: set[str] = set()
    answered: set[str] = set()
    for e in history:
        meta = e.get("tool_call_metadata")
        if not meta:
            continue
        if e.get("action"):
            response = meta["model_response"]
            if response["id"] in seen:
                continue
            seen.add(response["id"])
            msg = response["choices"][0]["message"]
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
                }
                for c in msg.get("tool_calls") or []
            ]
            out: dict[str, Any] = {"role": "assistant", "content": _text(msg.get("content")) or None}
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
        elif e.get("observation") and meta["tool_call_id"] not in answered:
            answered.add(meta["tool_call_id"])
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": meta["tool_call_id"],
                    "content": truncate(e.get("content") or "", limit),
                }
            )
    # a call the run never answered (the iteration limit): the loop ends before it
    while (
        messages
        and messages[-1]["role"] == "assistant"
        and any(c["id"] not in answered for c in messages[-1].get("tool_calls") or [])
    ):
        messages.pop()
    model = str(config.get("model") or "gpt-4o").split("/")[-1]
    return {"model": model, "tools": tools, "messages": messages}


def sweagent(traj: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for m in traj["history"]:
        role = m["role"]
        if role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": _text(m.get("content")) or None}
            if m.get("tool_calls"):
                out["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
                    }
                    for c in m["tool_calls"]
                ]
            messages.append(out)
        elif role == "tool":
            for call_id in m.get("tool_call_ids") or [m.get("tool_call_id")]:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(m.get("content"))})
        else:
            messages.append({"role": role, "content": _text(m.get("content"))})
    config = (
        json.loads(traj["replay_config"])
        if isinstance(traj.get("replay_config"), str)
        else traj.get("replay_config") or {}
    )
    model = (config.get("agent", {}).get("model", {}) or {}).get("name") or "claude-3-7-sonnet-20250219"
    return {"model": str(model).split("/")[-1], "tools": _schemas_of_calls(messages), "messages": messages}


def _schemas_of_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An object schema per tool named in the calls: the argument keys it was called with, as strings."""
    keys: dict[str, dict[str, None]] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            try:
                args = json.loads(c["function"]["arguments"] or "{}")
            except ValueError:
                args = {}
            keys.setdefault(c["function"]["name"], {}).update(dict.fromkeys(args if isinstance(args, dict) else {}))
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"the agent's {name} tool",
                "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in props}},
            },
        }
        for name, props in keys.items()
    ]


def moatless(traj: dict[str, Any]) -> dict[str, Any]:
    steps = [
        n["completions"]["build_action"]
        for n in traj["nodes"]
        if (n.get("completions") or {}).get("build_action", {}).get("input")
    ]
    last = steps[-1]
    messages = [dict(m) for m in last["input"]]
    response = last["response"]
    messages.append(
        {
            "role": "assistant",
            "content": [
                {k: v for k, v in block.items() if k in ("type", "text", "id", "name", "input")}
                for block in response["content"]
            ],
        }
    )
    # answer the last tool use the run made, as its next observation would (the loop's final turn)
    used = [b["id"] for b in messages[-1]["content"] if b.get("type") == "tool_use"]
    if used:
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "Done."} for i in used]}
        )
    inputs: dict[str, dict[str, None]] = {}
    for m in messages:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_use":
                inputs.setdefault(b["name"], {}).update(dict.fromkeys(b.get("input") or {}))
    tools = [
        {
            "name": name,
            "description": f"the agent's {name} action",
            "input_schema": {"type": "object", "properties": {k: {"type": "string"} for k in props}},
        }
        for name, props in inputs.items()
    ]
    return {
        "model": last.get("model") or "claude-3-5-sonnet-20241022",
        "system": traj["agent"]["system_prompt"],
        "tools": tools,
        "messages": messages,
    }


def tau2(
    sim: dict[str, Any], domain: str, info: dict[str, Any], tools: dict[str, Any], prompts: dict[str, Any]
) -> dict[str, Any]:
    policy = info["environment_info"]["policy"]
    system = prompts["SYSTEM_PROMPT"].format(agent_instruction=prompts["AGENT_INSTRUCTION"], domain_policy=policy)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    agent_calls: set[str] = set()
    for m in sim["messages"]:
        if m["role"] == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                out["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for c in m["tool_calls"]
                ]
                agent_calls.update(c["id"] for c in m["tool_calls"])
            messages.append(out)
        elif m["role"] == "tool":
            if m["id"] in agent_calls:
                messages.append({"role": "tool", "tool_call_id": m["id"], "content": m.get("content") or ""})
        elif m["role"] == "user" and m.get("content"):
            messages.append({"role": "user", "content": m["content"]})
    while messages[-1]["role"] != "tool" and messages[-1]["role"] != "user":
        messages.pop()
    model = info["agent_info"].get("llm", "gpt-4.1")
    return {"model": str(model).split("/")[-1], "tools": tools[domain], "messages": messages}


def _write(out: Path, name: str, body: dict[str, Any], source: str) -> None:
    body = {**body, "x_source": source}
    target = out / f"{name}.json.gz"
    with gzip.GzipFile(target, "wb", mtime=0) as f:  # (mtime 0: the same bytes from the same input)
        f.write(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    print(target, len(body["messages"]), "messages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=["openhands", "sweagent", "moatless", "tau2"])
    parser.add_argument("raw", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--tools", type=Path)
    parser.add_argument("--prompts", type=Path)
    parser.add_argument("--system-from", type=Path, help="openhands: a run whose system event the others lack")
    parser.add_argument("--pick", nargs="*", default=None, help="only these instance/simulation ids")
    parser.add_argument("--prefix", default="")
    args = parser.parse_args()
    for path in args.raw:
        text = _open(path)
        if args.family == "openhands":
            fallback = None
            if args.system_from:
                first = json.loads(_open(args.system_from).splitlines()[0])
                fallback = next(e for e in first["history"] if e.get("action") == "system")
            for line in text.splitlines():
                run = json.loads(line)
                if args.pick is None or run["instance_id"] in args.pick:
                    _write(
                        args.out, f"{args.prefix}openhands__{run['instance_id']}", openhands(run, fallback), str(path)
                    )
        elif args.family == "sweagent":
            traj = json.loads(text)
            _write(args.out, f"{args.prefix}sweagent__{path.name.split('.traj')[0]}", sweagent(traj), str(path))
        elif args.family == "moatless":
            traj = json.loads(text)
            _write(args.out, f"{args.prefix}moatless__{path.parent.name}", moatless(traj), str(path))
        else:
            data = json.loads(text)
            tools = json.loads(args.tools.read_text())
            prompts = json.loads(args.prompts.read_text())
            domain = data["info"]["environment_info"]["domain_name"]
            for sim in data["simulations"]:
                if args.pick is None or str(sim["task_id"]) in args.pick:
                    _write(
                        args.out,
                        f"{args.prefix}tau2__{domain}_{sim['task_id']}",
                        tau2(sim, domain, data["info"], tools, prompts),
                        str(path),
                    )


if __name__ == "__main__":
    main()
