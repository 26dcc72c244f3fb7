"""Turn public agent trajectories of several agent families into the request bodies bench.cache
replays (`{"model", "tools", "messages" | "system"+"messages", "x_source"}`, gzipped), one loop a file.

    python bench/corpus/agents/convert.py openhands RAW.jsonl [...]  --out bench/corpus/agents
    python bench/corpus/agents/convert.py sweagent RAW.traj [...]
    python bench/corpus/agents/convert.py moatless RAW/trajectory.json[.gz] [...]
    python bench/corpus/agents/convert.py tau2 RAW.json[.gz] --tools SCHEMAS.json --prompts PROMPTS.json [--pick ID ...]
    python bench/corpus/agents/convert.py tau2 RAW.json --tools-source agent_tools.py --prompts-source llm_agent.py
    python bench/corpus/agents/convert.py taubench gpt-4o-airline.json --tools SCHEMAS.json --pick TASK:TRIAL ...
    python bench/corpus/agents/convert.py livemcp OUTPUT.json --tools-source server.py --pick TASK_ID ...
    python bench/corpus/agents/convert.py spider2 RESULT.json --model claude-3-7-sonnet-20250219
    python bench/corpus/agents/convert.py codex rollout-*.jsonl --model gpt-5.5
    python bench/corpus/agents/convert.py claudecode session-*.jsonl
    python bench/corpus/agents/convert.py sweagent0 INSTANCE.traj --model gpt-4-1106-preview
    python bench/corpus/agents/convert.py cline TASK_ID/api_conversation_history.json [--model M]
    python bench/corpus/agents/convert.py smolagents gpt-4o__tool-calling__gaia__2025-07-24.jsonl --pick tool-calling_gaia_30
    python bench/corpus/agents/convert.py aider REPO/.aider.llm.history
    python bench/corpus/agents/convert.py tapeagents tests/res/gaia_agent/tapedata.sqlite.gz [--pick NAME ...]
    python bench/corpus/agents/convert.py roo spotted-errors/file-clear-error-2.md
    python bench/corpus/agents/convert.py kimi SESSION.jsonl --prompts-source agents/default/system.md
    python bench/corpus/agents/convert.py gemini trajectory.json --tag 19b9e3e8 --model gemini/gemini-3-flash-preview
    python bench/corpus/agents/convert.py gemini session-*.json --tag NAME   (a chat recording)
    python bench/corpus/agents/convert.py hermes example_rollouts_hermes.jsonl --model M [--pick 4]
    python bench/corpus/agents/convert.py terminus example_rollouts.jsonl --model gpt-5-mini [--pick 0]
    python bench/corpus/agents/convert.py copilot XX/CHECKPOINT/0/full.jsonl
    python bench/corpus/agents/convert.py opencode XX/CHECKPOINT/0/full.jsonl
    python bench/corpus/agents/convert.py trae RUN/trajectory.json [--tag NAME]
    python bench/corpus/agents/convert.py crush .crush/crush.db [--pick SESSION_ID_START ...]
    python bench/corpus/agents/convert.py goose SESSION.jsonl | RESULTS.yaml [--pick CASE_I ...]
    python bench/corpus/agents/convert.py mcpmark SERVICE/SERVER/run-N/TASK/messages.json
    python bench/corpus/agents/convert.py deerflow THREAD_ID/thread.json --prompts-source lead_agent/prompt.py [--reasoning]
    python bench/corpus/agents/convert.py toolathlon trajs/claude-4.5-sonnet_TASK.json
    python bench/corpus/agents/convert.py vscode samples/fix-deploy.json --prompts-source samples/X.chatreplay.json
    python bench/corpus/agents/convert.py nyuctf transcripts/baseline_gpt4/.../conversation.MODEL.N.json
    python bench/corpus/agents/convert.py letta agents/@letta-ai/NAME/NAME.af
    python bench/corpus/agents/convert.py pi_responses XX/CHECKPOINT/0/full.jsonl --tag CHECKPOINT
    python bench/corpus/agents/convert.py amp _threads/NNN_TITLE.md [--tag NAME] [--model M]
    python bench/corpus/agents/convert.py cursor .specstory/history/DATE_TITLE.md [--tag NAME] [--model M]
    python bench/corpus/agents/convert.py zed THREAD.md [--tag NAME] [--model M]
    python bench/corpus/agents/convert.py crewai CASSETTE.yaml [--tag NAME]
    python bench/corpus/agents/convert.py langgraph docs/cassettes/NOTEBOOK_ID.msgpack.zlib [--tag NAME]

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
- moatless_requests: the same, with every request the run sent (`x_requests`, each the messages
  it kept of the request before it and those it added): Moatless's history is not append-only,
  and `bench.cache` replays these requests as sent.
- tau2: tau2-bench simulations (gpt-4.1, OpenAI function calling, parallel calls): the agent's
  view (the user simulator's own tool calls left out), system prompt and tool schemas from the
  producing version's templates (or, with `--tools-source`/`--prompts-source`, read from the
  producing version's Python source without running it: each `@is_tool` method's signature and
  docstring, as tau2 builds its schemas). The user simulator's own tool calls (telecom: the
  customer's phone) and their results are left out: the agent never sees them.
- taubench: tau-bench (v1) `historical_trajectories/*.json` runs: `traj` is the exact OpenAI chat
  list the agent sent (the domain's wiki as its system message); tool schemas from `--tools`.
- livemcp: LiveMCPBench baseline outputs (an MCP client with two tools, `route` and
  `execute-tool`, Claude Sonnet 4 through an OpenAI-compatible endpoint): `messages` is what was
  sent, its tool calls stored as a Python repr (read with `ast.literal_eval`); schemas from the MCP
  server's source (`--tools-source`).
- spider2: Spider-Agent (spider-agent-tc) results: a text agent. Its tools are described in the
  system prompt; the model writes `<tool_call><function=NAME><parameter=K>V</parameter>...` and
  each result goes back as a user message. Rebuilt from the stored `conversation` the way its
  MessageProcessor builds the prompt (the `work_dir` argument the runner injects left out).
- kimi: Kimi CLI session logs (OpenAI chat, text parts kept as parts); see its function.
- gemini, hermes, terminus (session 35): a Gemini CLI history (Gemini `Content[]`, as chat), Hermes
  Agent rollouts recorded by NeMo Gym (Responses API items), and Terminus-2 rollouts (a text agent
  whose terminal output is the next user message); see their functions.
- smolagents, aider, roo: see their functions (session 32: a text agent whose observations are
  user messages, an agent that re-sends files and summaries in every request, and an IDE agent
  with parallel calls sent to an OpenAI-compatible provider).
- copilot, opencode (session 36), trae, crush (session 43), goose (session 44), mcpmark and
  nyuctf (session 45): see their functions (trae-agent stores each call's new messages only; Crush keeps its
  sessions in a SQLite database; Goose sends its tools' output once per audience; MCPMark stores
  its chat requests as Agents SDK items; the NYU CTF baseline agent logs OpenAI chat messages).
- minisweagent, pi (session 53), deerflow and toolathlon (session 54), vscode (session 55): see
  their functions (DeerFlow's threads are LangGraph checkpoints of LangChain messages; Toolathlon
  stores its MCP agent's chat messages as sent; VS Code's session export holds GitHub Copilot
  Chat's rounds and their results as prompt-tsx trees, not the requests).
- letta (session 58): a Letta agent file (`.af`, an agent's exported state): its in-context
  messages, as Letta's Anthropic client sends them through chat; see its function.
- pi_responses (session 58): a pi session on its `openai-codex` provider, as the Responses items
  that provider sends back; see its function.
- amp (session 59): an Amp thread exported as Markdown, as Anthropic messages; see its function.
- cursor (session 60): a Cursor agent chat as SpecStory exports it to Markdown, as chat messages;
  see its function.
- zed (session 61): a thread of Zed's agent exported as Markdown, as Anthropic messages; see its
  function.
- qcli (session 62): a conversation Amazon Q Developer CLI saved (`/save`), as Anthropic
  messages; qwen (session 62): a Qwen Code session exported as Markdown (`/export md`), as chat
  messages; see their functions.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import itertools
import json
import re
from collections import Counter
from datetime import datetime
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


def _drop_trailing_replies(messages: list[dict[str, Any]]) -> None:
    """Take the model's replies off the end of `messages`, so the loop ends on a request (the
    reply to the last request was never part of one)."""
    while messages and messages[-1]["role"] == "assistant":
        messages.pop()


def _drop_trailing_response_items(items: list[dict[str, Any]]) -> None:
    """`_drop_trailing_replies` for Responses API items: the model's messages, reasoning and calls
    off the end of `items`, so the loop ends where the client last sent."""
    while items and (items[-1].get("role") == "assistant" or items[-1].get("type") in ("reasoning", "function_call")):
        items.pop()


def _call(call_id: str, name: str, arguments: Any, ensure_ascii: bool = True) -> dict[str, Any]:
    """An OpenAI chat tool call of `name` with `arguments` (an object, sent as its JSON text; with
    `ensure_ascii` off, non-ASCII characters as they are, as LangChain writes them)."""
    text = json.dumps(arguments, ensure_ascii=ensure_ascii)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


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
    return _function_schemas(keys)


def _responses_schemas_of_calls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`_schemas_of_calls` for Responses API items: a function tool per name its `function_call`
    items call, in the Responses API's shape (name and parameters beside `type`)."""
    keys: dict[str, dict[str, None]] = {}
    for item in items:
        if item.get("type") == "function_call":
            args = json.loads(item.get("arguments") or "{}")
            keys.setdefault(item["name"], {}).update(dict.fromkeys(args if isinstance(args, dict) else {}))
    return [{"type": "function", **t["function"]} for t in _function_schemas(keys)]


def _function_schemas(keys: dict[str, dict[str, None]]) -> list[dict[str, Any]]:
    """An object schema per tool name: its argument keys (`keys[name]`), as strings."""
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


def _input_schemas_of_calls(messages: list[dict[str, Any]], what: str = "tool") -> list[dict[str, Any]]:
    """`_schemas_of_calls` for Anthropic messages: an object schema per tool its `tool_use` blocks
    call (the input keys it was called with, as strings), in the Messages API's shape."""
    inputs: dict[str, dict[str, None]] = {}
    for m in messages:
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b.get("type") == "tool_use":
                inputs.setdefault(b["name"], {}).update(dict.fromkeys(b.get("input") or {}))
    return [
        {
            "name": name,
            "description": f"the agent's {name} {what}",
            "input_schema": {"type": "object", "properties": {k: {"type": "string"} for k in props}},
        }
        for name, props in inputs.items()
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
    tools = _input_schemas_of_calls(messages, "action")
    return {
        "model": last.get("model") or "claude-3-5-sonnet-20241022",
        "system": traj["agent"]["system_prompt"],
        "tools": tools,
        "messages": messages,
    }


def moatless_requests(traj: dict[str, Any]) -> dict[str, Any]:
    """`moatless`, with every request the run sent (`x_requests`): Moatless stores each step's
    exact input, and its history is not append-only (a breakpoint moved every turn, a retried
    action's exchange rewritten). Each request is `[keep, added]`: the first `keep` messages of the
    request before it, then `added`."""
    body = moatless(traj)
    steps = [
        n["completions"]["build_action"]["input"]
        for n in traj["nodes"]
        if (n.get("completions") or {}).get("build_action", {}).get("input")
    ]
    return {**body, "x_requests": _as_sent(steps)}


def _as_sent(sent: list[list[Any]]) -> list[list[Any]]:
    """Requests as `bench.cache` replays them (`x_requests`): each `[keep, added]`, the first `keep`
    messages of the request before it, then `added`."""
    requests: list[list[Any]] = []
    previous: list[Any] = []
    for messages in sent:
        keep = 0
        while keep < min(len(messages), len(previous)) and messages[keep] == previous[keep]:
            keep += 1
        requests.append([keep, messages[keep:]])
        previous = messages
    return requests


def tapeagents_runs(path: Path, least: int = 15) -> dict[str, list[list[dict[str, Any]]]]:
    """The runs of a TapeAgents `tapedata.sqlite[.gz]` (its `LLMCalls` table: every request the
    agent sent, whole, with the reply) of at least `least` requests, each a list of the requests'
    messages in the order sent: by task (the question, the third message of every request), a run
    ending where the next request of its task starts over (the system prompt, the steps' schema
    and the question again, nothing after them)."""
    import sqlite3
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "tapedata.sqlite"
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            db.write_bytes(f.read())
        con = sqlite3.connect(db)
        try:
            prompts = [json.loads(row[0]) for row in con.execute("select prompt from LLMCalls order by timestamp")]
        finally:
            con.close()
    runs: dict[str, list[list[list[dict[str, Any]]]]] = {}
    for prompt in prompts:
        messages = prompt["messages"]
        if len(messages) < 3:
            continue
        task = runs.setdefault(messages[2]["content"], [])
        if not task or len(messages) <= 4 < len(task[-1][-1]):
            task.append([])
        task[-1].append(messages)
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for question, task_runs in runs.items():
        words = re.findall(
            r"[A-Za-z0-9]+", json.loads(question).get("content", "") if question.startswith("{") else question
        )
        slug = "_".join(words[:4]).lower()
        for k, run in enumerate(task_runs):
            if len(run) >= least:
                out[f"{slug}_{k}"] = run
    return out


def tapeagents(run: list[list[dict[str, Any]]], model: str = "gpt-4o-mini") -> dict[str, Any]:
    """A chat body from the requests of one TapeAgents run (`tapeagents_runs`), as sent
    (`x_requests`): ServiceNow's GAIA agent keeps its tape (plan, thoughts, actions, observations)
    and renders it as messages on every call: a system prompt, a user message with the JSON schema
    of every step it may take, the question, then each step as JSON text (its thoughts and actions
    the assistant's, observations the user's), older page observations shortened as the tape grows
    (so a request is not the one before plus a turn). No tool schemas: the steps are text. The
    database does not name the model (`model` stands in). Home paths and e-mail addresses are
    pseudonymised."""
    sent = [[{**m, "content": pseudonymised(_text(m.get("content")))} for m in messages] for messages in run]
    return {"model": model, "messages": sent[-1], "x_requests": _as_sent(sent[:-1])}


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
                out["tool_calls"] = [_call(c["id"], c["name"], c["arguments"]) for c in m["tool_calls"]]
                agent_calls.update(c["id"] for c in m["tool_calls"])
            messages.append(out)
        elif m["role"] == "tool":
            if m["id"] in agent_calls:
                messages.append({"role": "tool", "tool_call_id": m["id"], "content": m.get("content") or ""})
        elif m["role"] == "user" and m.get("content") and not m.get("tool_calls"):
            messages.append({"role": "user", "content": m["content"]})
    while messages[-1]["role"] != "tool" and messages[-1]["role"] != "user":
        messages.pop()
    model = info["agent_info"].get("llm", "gpt-4.1")
    return {"model": str(model).split("/")[-1], "tools": tools[domain], "messages": messages}


_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object"}


def _json_type(annotation: ast.expr | None) -> dict[str, Any]:
    """A JSON schema type for a Python annotation (read as source, never evaluated)."""
    text = ast.unparse(annotation) if annotation is not None else "str"
    text = re.sub(r"^Optional\[(.*)\]$", r"\1", text)
    text = text.split("|")[0].strip()
    head = text.split("[")[0].lower()
    return {"type": _TYPES.get(head, "object" if head in ("any", "mapping") else "string")}


def _doc_args(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's description (up to its Args section) and each argument's line."""
    head, _, rest = doc.partition("Args:")
    described: dict[str, str] = {}
    for line in rest.split("Returns:")[0].split("Raises:")[0].splitlines():
        name, sep, text = line.strip().partition(":")
        if sep and name.isidentifier():
            described[name] = text.strip()
    return " ".join(head.split()), described


def schemas_from_source(source: str, decorator: str = "is_tool") -> list[dict[str, Any]]:
    """OpenAI function schemas of the methods a toolkit's source marks as tools (`@is_tool(...)`):
    name, docstring and arguments (without `self`), read with `ast`, never run."""
    tools = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        marks = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
        if not any(isinstance(d, ast.Name) and d.id == decorator for d in marks):
            continue
        description, described = _doc_args(ast.get_docstring(node) or "")
        args = [a for a in node.args.args if a.arg != "self"]
        defaults = len(node.args.defaults)
        properties = {a.arg: {**_json_type(a.annotation), "description": described.get(a.arg, a.arg)} for a in args}
        required = [a.arg for a in args[: len(args) - defaults]]
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": node.name,
                    "description": description,
                    "parameters": {"type": "object", "properties": properties, "required": required},
                },
            }
        )
    return tools


def prompts_from_source(source: str) -> dict[str, str]:
    """The module-level string constants of a source file (tau2's SYSTEM_PROMPT, AGENT_INSTRUCTION)."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                # ("...""".strip(): the string before the call)
                call = node.value
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "strip":
                    value = ast.literal_eval(call.func.value).strip()
                else:
                    continue
            if isinstance(value, str):
                out[node.targets[0].id] = value
    return out


def taubench(run: dict[str, Any], tools: list[dict[str, Any]], model: str) -> dict[str, Any]:
    messages = []
    for m in run["traj"]:
        out = {k: m[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name") if m.get(k) is not None}
        if m["role"] == "assistant":
            out.setdefault("content", None)
            if out.get("tool_calls"):
                out["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": dict(c["function"])} for c in out["tool_calls"]
                ]
        messages.append(out)
    _drop_trailing_replies(messages)  # the loop ends on what the model last answered
    return {"model": model, "tools": tools, "messages": messages}


def livemcp(task: dict[str, Any], tools: list[dict[str, Any]], model: str) -> dict[str, Any]:
    messages = []
    for m in task["messages"]:
        out: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
        calls = m.get("tool_calls")
        if isinstance(calls, str):
            calls = ast.literal_eval(calls)
        if calls:
            out["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {k: c["function"][k] for k in ("name", "arguments")}}
                for c in calls
            ]
        if m.get("tool_call_id"):
            out["tool_call_id"] = m["tool_call_id"]
        messages.append(out)
    _drop_trailing_replies(messages)
    return {"model": model, "tools": tools, "messages": messages}


def livemcp_tools(source: str) -> list[dict[str, Any]]:
    """The two tools of LiveMCPBench's copilot MCP server, as FastMCP declares them (name and
    description from `@server.tool(...)`, arguments from the function, `ctx` left out)."""
    tools = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.AsyncFunctionDef):
            continue
        for d in node.decorator_list:
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "tool":
                kw = {k.arg: k.value for k in d.keywords}
                name = ast.literal_eval(kw["name"]) if "name" in kw else node.name
                description = ""
                if "description" in kw:
                    value = kw["description"]
                    if isinstance(value, ast.Call):  # dedent("""...""") and the like
                        value = value.args[0]
                    description = ast.literal_eval(value)
                args = [a for a in node.args.args if a.arg != "ctx"]
                tools.append(
                    {
                        "type": "function",
                        "function": {
                            "name": name,
                            "description": description,
                            "parameters": {
                                "type": "object",
                                "properties": {a.arg: _json_type(a.annotation) for a in args},
                                "required": [a.arg for a in args if "None" not in ast.unparse(a.annotation or a)],
                            },
                        },
                    }
                )
    return tools


def spider2(run: dict[str, Any], model: str) -> dict[str, Any]:
    """The prompt Spider-Agent sent: each assistant turn its text and one `<tool_call>` block,
    each result a user message."""
    messages: list[dict[str, Any]] = []
    for m in run["conversation"]:
        if m["role"] in ("system", "user"):
            messages.append({"role": m["role"], "content": m["content"]})
        elif m["role"] == "assistant":
            calls = m.get("tool_calls") or []
            if isinstance(calls, str):
                calls = ast.literal_eval(calls)
            text = (m.get("content") or "").strip()
            for c in calls[:1]:
                params = "".join(
                    f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in c["arguments"].items() if k != "work_dir"
                )
                text += f"\n\n<tool_call>\n<function={c['name']}>\n{params}</function>\n</tool_call>"
            messages.append({"role": "assistant", "content": text.strip()})
        elif m["role"] == "tool":
            messages.append({"role": "user", "content": m["content"]})
    _drop_trailing_replies(messages)
    return {"model": model, "tools": [], "messages": messages}


def codex(text: str, model: str) -> dict[str, Any]:
    """A Responses API body from a Codex CLI rollout: its base instructions, and the `input` items
    in order (messages, reasoning with encrypted content, function and custom tool calls and their
    outputs, web searches); tool schemas from the calls (the rollout does not store them)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    meta = next(line["payload"] for line in lines if line["type"] == "session_meta")
    items = [dict(line["payload"]) for line in lines if line["type"] == "response_item"]
    custom = dict.fromkeys(item["name"] for item in items if item.get("type") == "custom_tool_call")
    tools = _responses_schemas_of_calls(items)
    tools += [{"type": "custom", "name": name, "description": f"the agent's {name} tool"} for name in custom]
    if any(item.get("type") == "web_search_call" for item in items):
        tools.append({"type": "web_search"})
    _drop_trailing_response_items(items)
    return {
        "model": model,
        "instructions": meta["base_instructions"]["text"],
        "input": items,
        "tools": tools,
        "store": False,
    }


def claudecode(text: str) -> dict[str, Any]:
    """An Anthropic /v1/messages body from a Claude Code session log: the main thread (sidechain
    lines left out), one message per API response (its lines share `message.id`: thinking, text,
    tool use), consecutive user lines (tool results, prompts) as one user message, as Claude Code
    sends them. The session log holds neither the system prompt nor the tool schemas: a one-line
    system prompt and object schemas of the inputs each tool was called with stand in for them."""
    messages: list[dict[str, Any]] = []
    last_id = None
    model = None
    for line in text.splitlines():
        entry = json.loads(line) if line.strip() else {}
        msg = entry.get("message")
        if entry.get("type") not in ("user", "assistant") or entry.get("isSidechain") or not isinstance(msg, dict):
            continue
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        keep = ("type", "text", "thinking", "signature", "id", "name", "input", "tool_use_id", "content", "is_error")
        blocks = [{k: v for k, v in b.items() if k in keep} for b in blocks if isinstance(b, dict)]
        if not blocks:
            continue
        role = msg.get("role")
        model = msg.get("model") or model
        same = role == "assistant" and msg.get("id") == last_id
        if messages and messages[-1]["role"] == role and (same or role == "user"):
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
        last_id = msg.get("id") if role == "assistant" else None
    _drop_trailing_replies(messages)
    tools = _input_schemas_of_calls(messages)
    return {
        "model": model or "claude-sonnet-4-5-20250929",
        "system": "You are Claude Code, Anthropic's official CLI for Claude.",
        "tools": tools,
        "messages": messages,
    }


def sweagent0(traj: dict[str, Any], model: str) -> dict[str, Any]:
    """SWE-agent 0.x (text actions): its `history` is the chat it sent, demonstration included;
    each observation a user message."""
    messages = [{"role": m["role"], "content": m["content"]} for m in traj["history"]]
    _drop_trailing_replies(messages)
    return {"model": model, "messages": messages}


# what a public task folder may hold that is nobody's business here: home folders' user names,
# e-mail addresses and credentials pasted into a session (replaced, each by a fixed stand-in)
_PRIVATE = [
    (re.compile(r"(?i)([A-Z]:\\{1,2}Users\\{1,2})[^\\/\s\"']+"), r"\1user"),
    (re.compile(r"(/(?:Users|home)/)[^/\s\"']+"), r"\1user"),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"), "<redacted>"),
    (
        re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{12,}|xox[abpr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{20,})"),
        "<redacted>",
    ),
    (re.compile(r"\b[A-Za-z0-9._%+-]+@(?!example\.)[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), "user@example.com"),
]


def pseudonymised(text: str) -> str:
    """`text` without user names in home paths, e-mail addresses or credentials (see `_PRIVATE`)."""
    for pattern, stand_in in _PRIVATE:
        text = pattern.sub(stand_in, text)
    return text


def cline(history: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """An Anthropic /v1/messages body from a Cline task's `api_conversation_history.json` (Cline
    3.x, tools called as XML in the assistant's text, each result the next user message: "[tool
    for 'x'] Result:", the output, then an <environment_details> block). The file is the task's
    whole history as appended; Cline's own sliding-window truncation (its `ui_messages.json`
    records the deleted ranges) is left out: the guard does the cutting. The system prompt Cline
    builds per request is not stored: a one-line system prompt stands in. Home paths, e-mail
    addresses and credentials are pseudonymised."""
    messages = []
    for m in history:
        blocks = [
            {"type": "text", "text": pseudonymised(b["text"])}
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        if blocks:
            messages.append({"role": m["role"], "content": blocks})
    _drop_trailing_replies(messages)
    system = "You are Cline, a highly skilled software engineer; use one tool per message, written as XML."
    return {"model": model, "system": system, "max_tokens": 8192, "messages": messages}


def smolagents(run: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat body from a smolagents benchmark run (`examples/smolagents_benchmark/output/*.jsonl`,
    one task a line): its `intermediate_steps` are the agent's memory as messages, and smolagents
    sends them as `get_clean_message_list` does: a tool call ("Calling tools: [...]") as assistant
    text, its observation as a user message, consecutive messages of one role merged. Every turn is
    a user turn (the newest holds the result). A ToolCallingAgent's calls go to the model with tool
    schemas, which the run does not store: object schemas of the arguments used stand in (a
    CodeAgent writes code in its text and sends none)."""
    roles = {"tool-call": "assistant", "tool-response": "user"}
    messages: list[dict[str, Any]] = []
    inputs: dict[str, dict[str, None]] = {}
    for step in run["intermediate_steps"]:
        role = roles.get(step["role"], step["role"])
        parts = [{"type": "text", "text": c["text"]} for c in step.get("content") or [] if c.get("type") == "text"]
        if step["role"] == "tool-call" and run.get("agent_action_type") == "tool-calling":
            for text in (p["text"] for p in parts):
                for call in ast.literal_eval(text.split("\n", 1)[1]) if text.startswith("Calling tools:") else []:
                    args = call["function"].get("arguments")
                    inputs.setdefault(call["function"]["name"], {}).update(
                        dict.fromkeys(args if isinstance(args, dict) else {})
                    )
        if not parts:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(parts)
        else:
            messages.append({"role": role, "content": parts})
    _drop_trailing_replies(messages)
    tools = _function_schemas(inputs)
    return {"model": model, **({"tools": tools} if tools else {}), "messages": messages}


_AIDER_LINE = re.compile(r"^(SYSTEM|USER|ASSISTANT)(?: |$)(.*)$")


def _aider_messages(block: str) -> list[dict[str, Any]]:
    """The messages of one `TO LLM` block of an `.aider.llm.history` (each line prefixed with its
    role; a change of role starts a message, and so does a `-------` line)."""
    messages: list[dict[str, Any]] = []
    for chunk in re.split(r"^-------\n", block, flags=re.M):
        role, lines = None, []
        for line in chunk.split("\n"):
            m = _AIDER_LINE.match(line)
            if not m:
                continue
            if role is not None and m.group(1) != role:
                messages.append({"role": role.lower(), "content": pseudonymised("\n".join(lines))})
                lines = []
            role = m.group(1)
            lines.append(m.group(2))
        if role is not None:
            messages.append({"role": role.lower(), "content": pseudonymised("\n".join(lines).rstrip("\n"))})
    return messages


def aider(text: str, model: str, system: str = "Act as an expert architect engineer") -> dict[str, Any]:
    """A chat body from an Aider `.aider.llm.history` (every request Aider sent, whole, as
    `TO LLM` blocks): the requests whose system prompt starts with `system` (one thread; in
    architect mode the editor's own short requests are another), as sent (`x_requests`: Aider
    re-sends its repo map and files and summarizes old turns, so a request is not the one before
    plus a turn). Edits are SEARCH/REPLACE blocks in the assistant's text and files and command
    output come as user messages: no tools. The log does not name the model. Home paths, e-mail
    addresses and credentials are pseudonymised."""
    blocks = re.split(r"^(TO LLM|LLM RESPONSE) \S+\n", text, flags=re.M)
    sent = [_aider_messages(blocks[i + 1]) for i in range(1, len(blocks) - 1, 2) if blocks[i] == "TO LLM"]
    thread = [m for m in sent if m and m[0]["role"] == "system" and m[0]["content"].startswith(system)]
    return {"model": model, "messages": thread[-1], "x_requests": _as_sent(thread[:-1])}


def _scrubbed(value: Any) -> Any:
    """`value` with every string in it `pseudonymised` (not its JSON text: an escaped newline
    before an `@` would read as an e-mail address)."""
    if isinstance(value, str):
        return pseudonymised(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _roo_json(text: str) -> Any:
    """The JSON of a Roo Code "error details" export, repaired where a Markdown formatter escaped
    its punctuation (`\\_`, `\\*`: invalid JSON escapes) or starred a block type (`tool*use`)."""
    body = text[text.index("{") :]
    body = re.sub(r"(?<!\\)\\([_*#>\[\]()`~|!-])", r"\1", body)
    return json.loads(body.replace('"tool*use"', '"tool_use"').replace('"tool*result"', '"tool_result"'))


def roo(export: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat body from a Roo Code task history (its "share error details" export: `history` in
    Anthropic message blocks), as Roo sends it to an OpenAI-compatible provider: an assistant
    message with its text and `tool_calls` (parallel ones in one message), each `tool_result` a
    `tool` message, the rest of the user's blocks (an `<environment_details>` block every turn)
    a user message after them; reasoning blocks left out. Neither the system prompt nor the tool
    schemas are stored: a one-line system prompt and object schemas of the inputs used stand in.
    Home paths, e-mail addresses and credentials are pseudonymised."""
    messages: list[dict[str, Any]] = []
    for m in export["history"]:
        blocks = [b for b in m.get("content") or [] if isinstance(b, dict)]
        if isinstance(m.get("content"), str):
            blocks = [{"type": "text", "text": m["content"]}]
        text = pseudonymised("\n\n".join(b["text"] for b in blocks if b.get("type") == "text" and b.get("text")))
        if m["role"] == "assistant":
            calls = [b for b in blocks if b.get("type") == "tool_use"]
            out: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                out["tool_calls"] = [_call(b["id"], b["name"], _scrubbed(b.get("input") or {})) for b in calls]
            messages.append(out)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                content = b.get("content")
                if isinstance(content, list):
                    content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
                messages.append(
                    {"role": "tool", "tool_call_id": b["tool_use_id"], "content": pseudonymised(content or "")}
                )
        if text:
            messages.append({"role": "user", "content": text})
    _drop_trailing_replies(messages)
    tools = _schemas_of_calls(messages)
    system = {"role": "system", "content": "You are Roo, a highly skilled software engineer; use the tools given."}
    return {"model": model, "tools": tools, "messages": [system, *messages]}


def kimi(lines: str, system_template: str, model: str = "moonshot/kimi-k2.5") -> dict[str, Any]:
    """A chat body from a Kimi CLI session log (`~/.kimi/sessions/.../<id>.jsonl`: the context it
    sends, a message a line, in OpenAI chat form with content as text parts, which are kept as
    parts; its bookkeeping lines, role `_checkpoint` and `_usage`, left out). The system prompt is
    not logged: the agent's template (`system.md`; a ContextReader subagent's own) stands in, the
    working directory `/testbed`, its other variables empty. Tool schemas: object schemas of the
    arguments used."""
    messages = [m for m in (json.loads(line) for line in lines.splitlines() if line.strip()) if m["role"][0] != "_"]
    _drop_trailing_replies(messages)
    system = re.sub(r"\$\{([A-Z_]+)\}", lambda m: "/testbed" if m.group(1) == "KIMI_WORK_DIR" else "", system_template)
    return {
        "model": model,
        "tools": _schemas_of_calls(messages),
        "messages": [{"role": "system", "content": system}, *messages],
    }


def gemini(contents: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """A chat body from a Gemini CLI history (the Gemini API `Content[]` it sends: roles `user` and
    `model`, parts of text, thought summaries, `functionCall` and `functionResponse`): a model
    entry's text and calls as one assistant message (consecutive entries merged), a
    `functionResponse` as a `tool` message (its `response.output`, else the response as JSON), a
    user entry's text as a user message. Thought parts are left out (the API does not read them
    back as input). The system instruction and tool declarations are not stored: none stands in
    for the first, object schemas of the arguments used for the second."""
    messages: list[dict[str, Any]] = []
    for entry in contents:
        for part in entry["parts"]:
            if entry["role"] == "model":
                if part.get("thought"):
                    continue
                last = messages[-1] if messages and messages[-1]["role"] == "assistant" else None
                if last is None:
                    last = {"role": "assistant", "content": ""}
                    messages.append(last)
                if "text" in part:
                    last["content"] = (last["content"] + "\n" if last["content"] else "") + part["text"]
                elif "functionCall" in part:
                    call = part["functionCall"]
                    last.setdefault("tool_calls", []).append(_call(call["id"], call["name"], call.get("args") or {}))
            elif "functionResponse" in part:
                answer = part["functionResponse"]
                response = answer.get("response") or {}
                output = response.get("output") if isinstance(response.get("output"), str) else None
                text = output if output is not None else json.dumps(response, ensure_ascii=False)
                messages.append({"role": "tool", "tool_call_id": answer["id"], "content": text})
            elif "text" in part:
                messages.append({"role": "user", "content": part["text"]})
    _drop_trailing_replies(messages)
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": messages}


def hermes(run: dict[str, Any], model: str) -> dict[str, Any]:
    """A Responses API body from a NeMo Gym rollout of an agent with native function calls
    (Hermes Agent: `responses_create_params.input`, the task, then `response.output`: assistant
    messages, `function_call` and `function_call_output` items in order). The items keep their
    type, role, text, name, arguments, call ids and outputs (the rollout's token ids and log
    probabilities dropped, and assistant messages with no text). The agent's system prompt and
    tool schemas are not recorded: none for the first, object schemas of the arguments used."""
    items: list[dict[str, Any]] = []
    for item in [*run["responses_create_params"]["input"], *run["response"]["output"]]:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            if isinstance(content, list):
                text = "".join(p.get("text") or "" for p in content)
                part = "output_text" if item["role"] == "assistant" else "input_text"
                content = [{"type": part, "text": text}] if text else []
            if content:
                items.append({"type": "message", "role": item["role"], "content": content})
        elif kind == "function_call":
            items.append(
                {"type": kind, "call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"]}
            )
        elif kind == "function_call_output":
            items.append({"type": kind, "call_id": item["call_id"], "output": item["output"]})
    _drop_trailing_response_items(items)
    return {"model": model, "input": items, "tools": _responses_schemas_of_calls(items), "store": False}


def terminus(run: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat body from a NeMo Gym rollout of Terminus-2 (Harbor's Terminal-Bench agent), a text
    agent: its prompt (`responses_create_params.input`, one user message), then each assistant
    message (its JSON of analysis, plan and keystrokes) and the terminal output the agent sent back
    as the next user message (the rollout stores it as a `function_call_output`; the
    `function_call` items beside it are derived from the keystrokes and never sent)."""
    messages: list[dict[str, Any]] = []
    for item in [*run["responses_create_params"]["input"], *run["response"]["output"]]:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            text = content if isinstance(content, str) else "".join(p.get("text") or "" for p in content)
            messages.append({"role": item["role"], "content": text})
        elif kind == "function_call_output":
            messages.append({"role": "user", "content": item["output"]})
    _drop_trailing_replies(messages)
    return {"model": model, "messages": messages}


def copilot(lines: str) -> dict[str, Any]:
    """A chat body from a GitHub Copilot CLI session log (its `{type, data}` events, as Entire
    commits them): the system prompt (`system.message`, re-emitted unchanged at each user turn:
    sent once), each user message as sent (`transformedContent`: the date and reminders the CLI
    adds), each model reply (`assistant.message`: its text and `toolRequests` as tool calls) and the
    model-facing text of each tool result (`tool.execution_complete`'s `result.content`), in its
    calls' order. A call with no result (an aborted turn) is left out; the replies' opaque
    reasoning is not kept; hooks, permissions and timings are dropped. The tool schemas are not
    logged: object schemas of the arguments used. The model: the session's first reply's. Home
    paths, e-mail addresses and credentials are pseudonymised."""
    events = [json.loads(line) for line in lines.splitlines() if line.strip()]
    results = {
        e["data"]["toolCallId"]: _text((e["data"].get("result") or {}).get("content"))
        for e in events
        if e["type"] == "tool.execution_complete"
    }
    messages: list[dict[str, Any]] = []
    model = None
    for e in events:
        data = e["data"]
        if e["type"] == "system.message" and not messages:
            messages.append({"role": "system", "content": data["content"]})
        elif e["type"] == "user.message":
            messages.append({"role": "user", "content": data.get("transformedContent") or data["content"]})
        elif e["type"] == "assistant.message":
            model = model or data.get("model")
            calls = [c for c in data.get("toolRequests") or [] if c["toolCallId"] in results]
            out: dict[str, Any] = {"role": "assistant", "content": data.get("content") or None}
            if calls:
                out["tool_calls"] = [_call(c["toolCallId"], c["name"], c.get("arguments") or {}) for c in calls]
            messages.append(out)
            messages += [
                {"role": "tool", "tool_call_id": c["toolCallId"], "content": results[c["toolCallId"]]} for c in calls
            ]
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    return {"model": model or "claude-sonnet-4.6", "tools": _schemas_of_calls(messages), "messages": messages}


def trae(run: dict[str, Any]) -> dict[str, Any]:
    """A chat body from a trae-agent `trajectory.json` (its `llm_interactions`: each call stores
    only the messages new since the last one, `input_messages`, and the model's `response`): the
    first call's messages (system prompt, the MCP tools' listing, the task; through Anthropic's
    API the listing alone, as trae sends it), then per call its reply (text and `tool_calls` as
    OpenAI tool calls) and the next call's new messages: a tool result (`tool_result`: its
    `result`, and its `error` after it as trae appends it) as a `tool` message, any other as the
    user message it is. The model: the run's. The tool schemas are not
    stored (their names only): object schemas of the arguments used. Home paths, e-mail addresses
    and credentials are pseudonymised."""
    messages: list[dict[str, Any]] = []
    for call in run["llm_interactions"]:
        for m in call["input_messages"]:
            result = m.get("tool_result")
            if result is not None:
                text = "" if result.get("result") is None else str(result["result"])
                if result.get("error"):
                    text += f"\nError: {result['error']}" if text else f"Error: {result['error']}"
                messages.append({"role": "tool", "tool_call_id": result["call_id"], "content": text})
            else:
                messages.append({"role": m["role"], "content": m.get("content") or ""})
        response = call["response"]
        out: dict[str, Any] = {"role": "assistant", "content": response.get("content") or None}
        calls = response.get("tool_calls") or []
        if calls:
            out["tool_calls"] = [_call(c["call_id"], c["name"], c.get("arguments") or {}) for c in calls]
        messages.append(out)
    if run.get("provider") in ("anthropic", "bedrock"):
        # trae's Anthropic clients keep one system prompt, the last system message they are given:
        # the MCP tools' listing took the place of the agent's own prompt (each Claude run's first
        # call was billed 5,992 and 6,411 tokens, under what the two together count)
        systems = [m for m in messages if m["role"] == "system"]
        messages = systems[-1:] + [m for m in messages if m["role"] != "system"]
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    model = re.sub(r"-v\d+$", "", str(run["model"]).split(":")[0].split(".")[-1])  # (Bedrock's id: its model's name)
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": messages}


def crush(rows: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    """A chat body from a Charm Crush session (`.crush/crush.db`: its `messages` rows `(role,
    parts, model)` in order, each `parts` a JSON list of `{type, data}`): a user message's text
    parts; each assistant message is one model call, its text and `tool_call` parts (the call's
    `input` is its arguments' JSON) as an assistant message, and the `tool_result` parts of the
    `tool` message after it as tool messages. As Crush builds its requests, a call that ended in
    an API error or wrote nothing is left out, and a tool call with no result (cancelled) with it.
    Reasoning parts are left out. The system prompt and tool schemas are not stored: a one-line
    stand-in, and object schemas of the arguments used. The model: the one most calls used (a
    session can switch). Home paths, e-mail addresses and credentials are pseudonymised."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are Crush, a CLI coding assistant."}]
    models: Counter[str] = Counter()
    results: dict[str, str] = {}
    parsed = [(role, json.loads(parts or "[]"), model) for role, parts, model in rows]
    for role, parts, _ in parsed:
        if role == "tool":
            for p in parts:
                if p["type"] == "tool_result":
                    results[p["data"]["tool_call_id"]] = p["data"].get("content") or ""
    for role, parts, model in parsed:
        texts = "\n".join(p["data"].get("text") or "" for p in parts if p["type"] == "text").strip()
        if role == "user":
            if texts:
                messages.append({"role": "user", "content": texts})
        elif role == "assistant":
            calls = [p["data"] for p in parts if p["type"] == "tool_call" and p["data"]["id"] in results]
            if not texts and not calls:
                continue  # (an API error, or a call cancelled before it wrote anything)
            models[model or ""] += 1
            out: dict[str, Any] = {"role": "assistant", "content": texts or None}
            if calls:
                # (its arguments as Crush sends them: the model's text, JSON or not)
                out["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c.get("input") or ""},
                    }
                    for c in calls
                ]
            messages.append(out)
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": results[c["id"]]} for c in calls]
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    model = models.most_common(1)[0][0] if models else ""
    # (OpenRouter's names, `google/gemini-2.5-pro`: LiteLLM's for the same model)
    vendor, _, name = model.rpartition("/")
    model = f"gemini/{name}" if vendor == "google" else name
    return {"model": model or "gpt-5", "tools": _schemas_of_calls(messages), "messages": messages}


def crush_sessions(path: Path, pick: list[str] | None) -> dict[str, list[tuple[str, str, str | None]]]:
    """The rows `crush` reads of each session of a Crush database (`pick`: ids or their starts;
    else every session), in the order Crush keeps them (created, then inserted)."""
    import sqlite3

    con = sqlite3.connect(path)  # (read-write: opened read-only, the write-ahead log beside it went unread)
    try:
        ids = [row[0] for row in con.execute("select id from sessions order by created_at")]
        chosen = [i for i in ids if pick is None or any(i.startswith(p) for p in pick)]
        query = "select role, parts, model from messages where session_id = ? order by created_at, rowid"
        return {i: con.execute(query, (i,)).fetchall() for i in chosen}
    finally:
        con.close()


def gemini_recording(recording: dict[str, Any]) -> list[dict[str, Any]]:
    """The Gemini API `Content[]` of a Gemini CLI chat recording (`session-*.json`: `user` and
    `gemini` records, a model reply's calls with their `functionResponse` results inside it; its
    `info` notices are not sent), for `gemini`. A call with no result (cancelled) is left out."""
    contents: list[dict[str, Any]] = []
    for m in recording["messages"]:
        if m["type"] == "user":
            parts = m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]
            contents.append({"role": "user", "parts": parts})
        elif m["type"] == "gemini":
            calls = [c for c in m.get("toolCalls") or [] if c.get("result")]
            text = m.get("content") or ""
            parts = ([{"text": text}] if text else []) + [
                {"functionCall": {"id": c["id"], "name": c["name"], "args": c.get("args") or {}}} for c in calls
            ]
            contents.append({"role": "model", "parts": parts})
            answers = [r for c in calls for r in c["result"] if "functionResponse" in r]
            if answers:
                contents.append({"role": "user", "parts": answers})
    return contents


_INTERRUPTED = "[Tool execution was interrupted]"


def opencode(export: dict[str, Any]) -> dict[str, Any]:
    """A chat body from an OpenCode session (`opencode export`, as Entire commits it: one JSON
    document of messages, each its parts). Each assistant message is one model call: its text and
    tool parts (a call and its result in one part: `state.input`, then `state.output`, or
    `state.error`, or an interruption notice) become an assistant message and its tool results; a
    user message's text parts, OpenCode's synthetic ones (file contents, reminders) included. The
    loop ends where the session first compacted itself (after that OpenCode sends its summary in
    place of the history). Reasoning parts are left out (whether a provider reads them back
    differs), as are patches and step markers. The system prompt and tool schemas are not stored:
    a one-line stand-in, and object schemas of the arguments used. The model: the first call's.
    Home paths, e-mail addresses and credentials are pseudonymised."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are opencode, an interactive CLI coding agent."}
    ]
    model = None
    for m in export["messages"]:
        info, parts = m["info"], m["parts"]
        if any(p["type"] == "compaction" for p in parts) or info.get("summary") is True:
            break
        if info["role"] == "user":
            text = "\n".join(p["text"] for p in parts if p["type"] == "text" and not p.get("ignored"))
            if text:
                messages.append({"role": "user", "content": text})
            continue
        model = model or info.get("modelID")
        tools = [p for p in parts if p["type"] == "tool"]
        out: dict[str, Any] = {
            "role": "assistant",
            "content": "\n".join(p["text"] for p in parts if p["type"] == "text") or None,
        }
        if tools:
            out["tool_calls"] = [_call(p["callID"], p["tool"], p["state"].get("input") or {}) for p in tools]
        if out["content"] is None and not tools:
            continue  # (an aborted call that wrote nothing)
        messages.append(out)
        for p in tools:
            state = p["state"]
            text = state.get("output") if state["status"] == "completed" else state.get("error")
            messages.append({"role": "tool", "tool_call_id": p["callID"], "content": _text(text) or _INTERRUPTED})
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    return {"model": model or "claude-sonnet-4.6", "tools": _schemas_of_calls(messages), "messages": messages}


def goose(lines: list[dict[str, Any]], model: str = "claude-sonnet-4-20250514") -> dict[str, Any]:
    """An Anthropic /v1/messages body from a Goose session (its `sessions/*.jsonl`: a metadata line,
    then one line per message, blocks `text`, `toolRequest`, `toolResponse`), built the way Goose's
    Anthropic renderer of September 2025 (rmcp 0.6) built one: a tool request as `tool_use`; a tool
    response as one `tool_result` whose content is the text of each of its parts joined by newlines
    (a text part's text, an embedded resource's text), whatever audience a part is annotated for
    (Goose sends its developer tools' output twice, once per audience: the usage the sessions log
    for their last call matches only that), an error as `Error: ...` with `is_error`; a request
    whose call failed to parse is left out, with its response. The session holds neither the
    system prompt nor the tool schemas: a one-line system prompt and schemas of the arguments
    used stand in for them. Home paths, e-mail addresses and credentials are pseudonymised."""
    messages: list[dict[str, Any]] = []
    failed: set[str] = set()
    for line in lines:
        if not isinstance(line, dict) or line.get("role") not in ("user", "assistant"):
            continue  # (the metadata line)
        blocks: list[dict[str, Any]] = []
        for b in line.get("content") or []:
            kind = b.get("type")
            if kind == "text" and b.get("text"):
                blocks.append({"type": "text", "text": b["text"]})
            elif kind == "toolRequest":
                call = b.get("toolCall") or {}
                if call.get("status") != "success":
                    failed.add(b["id"])
                    continue
                value = call["value"]
                blocks.append(
                    {"type": "tool_use", "id": b["id"], "name": value["name"], "input": value.get("arguments") or {}}
                )
            elif kind == "toolResponse" and b["id"] not in failed:
                result = b.get("toolResult") or {}
                if result.get("status") == "success":
                    parts = [
                        p.get("text") if p.get("type") == "text" else (p.get("resource") or {}).get("text")
                        for p in result.get("value") or []
                        if isinstance(p, dict)
                    ]
                    text = "\n".join(t for t in parts if isinstance(t, str))
                    blocks.append({"type": "tool_result", "tool_use_id": b["id"], "content": text})
                else:
                    error = f"Error: {result.get('error')}"
                    blocks.append({"type": "tool_result", "tool_use_id": b["id"], "content": error, "is_error": True})
        if blocks:
            messages.append({"role": line["role"], "content": blocks})
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    # (and the user name of the session's home folder, as a word anywhere and in any path to it,
    # however deeply escaped or wrapped: a result quoting JSON that quotes a path doubles its
    # backslashes each time)
    meta = next((line for line in lines if isinstance(line, dict) and "working_dir" in line), {})
    home = re.search(r"(?i)[\\/](?:Users|home)[\\/]+([^\\/\s\"']+)", str(meta.get("working_dir", "")))
    if home and home.group(1) != "user":
        name = re.escape(home.group(1))
        dumped = re.sub(r"(?i)((?:Users|home)(?:\\[\\rnt]|/|\s)+)" + name + r"\b", r"\1user", json.dumps(messages))
        messages = json.loads(re.sub(r"\b" + name + r"\b", "user", dumped))
    tools = _input_schemas_of_calls(messages)
    system = "You are a general-purpose AI agent called goose, created by Block."
    return {"model": model, "system": system, "max_tokens": 64000, "tools": tools, "messages": messages}


def goose_sessions(path: Path, text: str, pick: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    """The session lines `goose` reads, by name: a session `.jsonl` as it is, or each Goose run of a
    metacoder results YAML (`results[i].execution_metadata.structured_messages`, the session file
    read line by line; named `<case>_<i>`, `pick`: those names or indices)."""
    if path.suffix == ".jsonl":
        return {path.stem: [json.loads(line) for line in text.splitlines() if line.strip()]}
    import yaml

    out = {}
    for i, run in enumerate(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["results"]):
        lines = (run.get("execution_metadata") or {}).get("structured_messages")
        name = f"{run.get('case_name', 'run')}_{i}"
        if run.get("coder") == "goose" and lines and (pick is None or name in pick or str(i) in pick):
            out[name] = lines
    return out


# MCPMark's agent's system prompt (eval-sys/mcpmark, src/agents/mcpmark_agent.py, Apache-2.0): its
# runs store every message but this one
MCPMARK_SYSTEM = (
    "You are a helpful agent that uses tools iteratively to complete the user's task, "
    'and when finished, provides the final answer or simply states "Task completed" without further tool calls.'
)


def mcpmark(items: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """A chat body from an MCPMark run's `messages.json`, as its agent (a LiteLLM function-calling
    loop over an MCP server's tools, `MCPMarkAgent._execute_litellm_tool_loop` of September 2025)
    sent it: the system prompt the file leaves out, the task, then per model call its reply (an
    `output_text` message and the `function_call` items after it, as one assistant message with
    OpenAI tool calls) and a `tool` message per `function_call_output`, its content the `text` its
    `output` wraps (the JSON of the MCP result, as the agent sent it). Items already in chat form
    (a few runs) are taken as they are. The MCP servers' tool schemas are not stored: schemas of
    the arguments used stand in for them. Home paths, e-mail addresses and credentials are
    pseudonymised."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": MCPMARK_SYSTEM}]
    reply: dict[str, Any] | None = None  # the assistant message the next calls belong to
    for item in items:
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call":
            if reply is None:
                reply = {"role": "assistant", "content": None}
                messages.append(reply)
            reply.setdefault("tool_calls", []).append(
                {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"},
                }
            )
            continue
        reply = None
        if kind == "function_call_output":
            output = item.get("output") or ""
            try:
                wrapped = json.loads(output)
            except ValueError:
                wrapped = None
            text = wrapped.get("text") if isinstance(wrapped, dict) and isinstance(wrapped.get("text"), str) else output
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
        elif role == "assistant" and kind == "message":
            text = "\n".join(p.get("text") or "" for p in item.get("content") or [] if isinstance(p, dict))
            reply = {"role": "assistant", "content": text or None}
            messages.append(reply)
        elif role == "system":
            messages[0] = {"role": "system", "content": _text(item.get("content"))}
        elif role in ("user", "assistant", "tool"):
            chat = {k: item[k] for k in ("role", "content", "tool_calls", "tool_call_id") if item.get(k) is not None}
            messages.append({"content": None, **chat} if role == "assistant" else {"content": "", **chat})
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": messages}


def nyuctf(run: dict[str, Any]) -> dict[str, Any]:
    """A chat body from a conversation log of the NYU CTF baseline agent (NYU-LLM-CTF's
    `llm_ctf_automation`, OpenAI backend: `conversation.<model>.<n>.json`): `messages` holds each
    message it sent, as the OpenAI chat message it was, beside its time; the times and the fields
    the log writes as null go. The tool schemas are not stored: schemas of the arguments used
    stand in for them. Home paths, e-mail addresses and credentials are pseudonymised."""
    messages = [{k: v for k, v in m.items() if v is not None} for _, m in run["messages"]]
    for m in messages:
        if m.get("role") == "assistant":
            m.setdefault("content", None)
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    return {"model": run["args"]["model"], "tools": _schemas_of_calls(messages), "messages": messages}


def minisweagent(traj: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    """A chat body from a mini-swe-agent trajectory (`*.traj.json`: SWE-agent's bash-only agent,
    which calls LiteLLM with its `messages` as they are stored). Format "mini-swe-agent-1" (v1) is
    text: each command a bash block in the assistant's text, each output (`<returncode>`,
    `<output>`) the next user message; "mini-swe-agent-1.1" (v2) may call a `bash` tool, its
    outputs `tool` messages. What LiteLLM sends of a message stays (role, content, tool calls and
    ids, DeepSeek's `reasoning_content`, which the model's tool loop sends back); each message's
    `extra` (the raw response, timings, the actions parsed) and `provider_specific_fields` go, and
    so does the run's end (v2's `exit` message, v1's last user message: the patch submitted, never
    sent). The tool schema is not stored: one of the arguments used stands in for it."""
    sent = ("role", "content", "tool_calls", "tool_call_id", "reasoning_content")
    messages = [
        {k: m[k] for k in sent if m.get(k) is not None}
        for m in traj["messages"]
        if m.get("role") in ("system", "user", "assistant", "tool")
    ]
    # (v1 stores the run's end, the patch submitted or the limit hit, as a last user message)
    end = traj["info"].get("submission")
    if messages and messages[-1]["role"] == "user" and end is not None and messages[-1].get("content") == end:
        messages.pop()
    for m in messages:
        if m["role"] == "assistant":
            m.setdefault("content", None)
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    name = model or traj["info"]["config"]["model"]["model_name"]
    body: dict[str, Any] = {"model": name, "messages": messages}
    if any(m.get("tool_calls") for m in messages):
        body["tools"] = _schemas_of_calls(messages)
    return body


_SKILL_FILE = re.compile(r"^---\nname: *(\S+)\ndescription: *(.*?)\n", re.S)


def deerflow(thread: dict[str, Any], template: str, reasoning: bool, model: str) -> dict[str, Any]:
    """A chat body from a DeerFlow 2.0 thread (`thread.json`: a LangGraph checkpoint of its
    `lead_agent`, whose `values.messages` are LangChain messages, `human`, `system`, `ai` and
    `tool`, the whole history in order), as LangChain's OpenAI-compatible clients send it: a human
    message's content as its parts, the uploads middleware's `system` messages where they stand,
    an AI message's text (None beside calls) and its `tool_calls` (the arguments' JSON text as
    LangChain writes it, `ensure_ascii=False`), a tool message's content and call id. With
    `reasoning`, each AI message's `reasoning_content` goes back too (DeerFlow's
    PatchedChatDeepSeek, from its commit of 2026-01-28, sends it on every assistant message; the
    stock ChatDeepSeek before it did not). The system prompt is not stored: the lead agent's
    `SYSTEM_PROMPT_TEMPLATE` of the thread's commit stands in, its skills those the thread reads
    (each skill file it read names its skill and description), the thread's date as its date.
    Tool schemas: object schemas of the arguments used."""
    messages: list[dict[str, Any]] = []
    skills: dict[str, tuple[str, str]] = {}
    calls: dict[str, str] = {}
    for m in thread["values"]["messages"]:
        kind, content = m["type"], m.get("content")
        if kind == "human":
            messages.append({"role": "user", "content": content})
        elif kind == "system":
            messages.append({"role": "system", "content": content})
        elif kind == "ai":
            out: dict[str, Any] = {"role": "assistant", "content": content or None}
            if m.get("tool_calls"):
                out["tool_calls"] = [_call(c["id"], c["name"], c["args"], ensure_ascii=False) for c in m["tool_calls"]]
                calls.update((c["id"], str(c["args"].get("path", ""))) for c in m["tool_calls"])
            if reasoning and (m.get("additional_kwargs") or {}).get("reasoning_content") is not None:
                out["reasoning_content"] = m["additional_kwargs"]["reasoning_content"]
            messages.append(out)
        elif kind == "tool":
            messages.append({"role": "tool", "content": content, "tool_call_id": m["tool_call_id"]})
            found = _SKILL_FILE.match(content) if isinstance(content, str) else None
            if found and calls.get(m["tool_call_id"], "").endswith("SKILL.md"):
                skills[found.group(1)] = (calls[m["tool_call_id"]], found.group(2).strip())
    _drop_trailing_replies(messages)
    listed = "\n".join(
        f'<skill name="{name}" path="{path}">\n{description}\n</skill>' for name, (path, description) in skills.items()
    )
    day = datetime.fromisoformat(thread["created_at"]).strftime("%Y-%m-%d, %A")
    system = template.format(skills_list=listed or "<!-- No skills available -->", skills_base_path="/mnt/skills")
    system += f"\n<current_date>{day}</current_date>"
    messages = _scrubbed([{"role": "system", "content": system}, *messages])
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": messages}


def letta(agent_file: dict[str, Any]) -> dict[str, Any]:
    """A chat body from a Letta agent file (`.af`: an agent's state, exported), of its agent with
    the most messages: its in-context messages in their order (`in_context_message_ids`), as
    Letta's Anthropic client sends them through chat: the system message (only the last one is
    stored: Letta re-renders it as the memory blocks change), each user message's text, each
    reply's text and its tool calls (its native reasoning left out, as the chat bodies of the other
    families leave it), each tool result's text and call id; the agent's own tools' schemas
    (`json_schema` of the file's tools it has). The history Letta had already evicted is not
    stored: its summary message stands where Letta put it, after the system message."""
    agent = max(agent_file["agents"], key=lambda a: len(a.get("messages") or []))
    by_id = {m["id"]: m for m in agent["messages"]}
    messages: list[dict[str, Any]] = []
    for m in (by_id[i] for i in agent["in_context_message_ids"] if i in by_id):
        role = m["role"]
        text = "\n".join(p["text"] for p in m.get("content") or [] if p.get("type") == "text")
        if role in ("system", "user"):
            messages.append({"role": role, "content": text})
        elif role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": text or None}
            if m.get("tool_calls"):
                out["tool_calls"] = [
                    _call(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                    for c in m["tool_calls"]
                ]
            messages.append(out)
        elif role == "tool":
            messages.append({"role": "tool", "content": text, "tool_call_id": m["tool_call_id"]})
    _drop_trailing_replies(messages)
    tools = [
        {"type": "function", "function": t["json_schema"]} for t in agent_file["tools"] if t["id"] in agent["tool_ids"]
    ]
    return {"model": agent["llm_config"]["model"], "tools": tools, "messages": _scrubbed(messages)}


_AMP_TOOL = re.compile(r"^\*\*Tool (Use|Result|Error|Cancelled):\*\* `([^`]+)`$")
_AMP_HEADERS = ("## User", "## Assistant", "## Todos")


def _amp_fence_end(lines: list[str], start: int) -> int:
    """Where the fenced block opening at `lines[start]` closes: at the first ``` line after which
    (blank lines aside) the next tool marker, section header or the end comes. A tool's output may
    hold fenced blocks of its own (a subagent's Markdown), and the export does not escape them."""
    closes = [j for j in range(start + 1, len(lines)) if lines[j].rstrip() == "```"]
    for j in closes:
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k == len(lines) or lines[k] in _AMP_HEADERS or _AMP_TOOL.match(lines[k]):
            return j
    if not closes:
        raise ValueError(f"a fenced block at line {start} never closes")
    return closes[0]


def _amp_messages(text: str) -> list[dict[str, Any]]:
    """The messages of an Amp thread export: each `## User` or `## Assistant` section one message
    of its blocks in order (the front matter and title before the first, and the export's closing
    `## Todos` list, the thread's todo items the model saw as `todo_write` results, left out): its
    text, each `**Tool Use:**` line with the fenced JSON input after it (a `tool_use` block, its id
    left for the result's), each `**Tool Result:**` line with the fenced output after it (a
    `tool_result` block of that text); a `**Tool Error:**` line with the `**Error:**` paragraph
    after it, and a `**Tool Cancelled:**` line, are error results (the latter's text a stand-in:
    the export does not say what Amp sent for a call it cancelled). Consecutive sections of one
    role are one message."""
    lines = text.split("\n")
    messages: list[dict[str, Any]] = []
    text_lines: list[str] = []

    def flush() -> None:
        joined = "\n".join(text_lines).strip()
        if joined and messages:
            messages[-1]["content"].append({"type": "text", "text": joined})
        text_lines.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        marker = _AMP_TOOL.match(line)
        if line in _AMP_HEADERS:
            flush()
            if line == "## Todos" and messages:
                break
            messages.append({"role": line[3:].lower(), "content": []})
            i += 1
            continue
        if marker is None or not messages:
            text_lines.append(line)
            i += 1
            continue
        flush()
        kind, name = marker.groups()
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        if kind in ("Error", "Cancelled"):  # (an error's paragraph: `**Error:** ...`, up to a blank line)
            end = i
            while kind == "Error" and end < len(lines) and lines[end].strip() and not _AMP_TOOL.match(lines[end]):
                end += 1
            error = "\n".join(lines[i:end]).removeprefix("**Error:**").strip() or "cancelled"
            messages[-1]["content"].append(
                {"type": "tool_result", "tool_use_id": name, "content": error, "is_error": True}
            )
            i = end
            continue
        if i == len(lines) or not lines[i].startswith("```"):
            raise ValueError(f"no fenced block after {marker.group(0)!r}")
        end = _amp_fence_end(lines, i)
        body = "\n".join(lines[i + 1 : end])
        if kind == "Use":
            messages[-1]["content"].append({"type": "tool_use", "id": "", "name": name, "input": json.loads(body)})
        else:
            messages[-1]["content"].append({"type": "tool_result", "tool_use_id": name, "content": body})
        i = end + 1
    flush()
    # a call the user interrupted: its cancelled result, then the user's next message, in one user
    # message (the Messages API's results come first in the message after the calls)
    return _merged_turns(messages)


def _merged_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic `messages` (content lists) with each run of one role's messages merged into one,
    empty ones left out, and each user message's tool results before its other blocks (the
    Messages API's results come first in the message after the calls)."""
    merged: list[dict[str, Any]] = []
    for m in (m for m in messages if m["content"]):
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1]["content"].extend(m["content"])
        else:
            merged.append(m)
    for m in merged:
        if m["role"] == "user":
            m["content"].sort(key=lambda b: b["type"] != "tool_result")
    return merged


def amp(text: str, model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    """An Anthropic /v1/messages body from an Amp thread exported as Markdown (front matter, then
    `## User` and `## Assistant` sections): each section one message of its blocks (`_amp_messages`),
    each reply's calls given the ids of the results the next user message holds, in order (the
    export writes a call's id on its result only; a reply's calls and the results after it match
    one for one, or the conversion fails). Amp sends the tool results as the next user message's
    blocks, the user's own text after them. Neither Amp's system prompt, its tool schemas, the
    model's thinking nor the model are exported: a one-line system prompt, object schemas of the
    inputs used and `model` stand in. Home paths pseudonymised."""
    messages = _amp_messages(text)
    for reply, after in zip(messages, messages[1:] + [{"role": "user", "content": []}]):
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        if reply["role"] != "assistant" or not calls:
            continue
        results = [b["tool_use_id"] for b in after["content"] if b["type"] == "tool_result"]
        if after["role"] != "user" or len(results) != len(calls):
            if not after["content"]:  # (the thread's last reply: never answered)
                continue
            raise ValueError(f"{len(calls)} calls answered by {len(results)} results")
        for call, result_id in zip(calls, results):
            call["id"] = result_id
    _drop_trailing_replies(messages)
    return {
        "model": model,
        "system": "You are Amp, a coding agent.",
        "tools": _input_schemas_of_calls(messages),
        "messages": _scrubbed(messages),
    }


_CURSOR_TURN = re.compile(r"^_\*\*(User|Assistant)\b.*\*\*_$")
_CURSOR_TOOL = re.compile(r"^Tool use: \*\*([^*]+)\*\*")
# the tools whose step holds what the model wrote (an edit's diff, a todo list, why a file goes):
# the call's arguments; every other tool's step holds what came back (a command's output, a
# search's table)
_CURSOR_WRITES = {"search_replace", "apply_patch", "MultiEdit", "write", "edit_file", "todo_write", "delete_file"}
_CURSOR_THINK = re.compile(r"<think>.*?</think>", re.S)


def _cursor_fence_closes(lines: list[str], j: int, opened: str) -> bool:
    """Whether the ``` line `lines[j]` closes the fenced block `opened` (its first line): a
    command's block (```` ```bash ````) at its first ``` line; any other (a command's output, a
    diff) only where the next line that is not blank ends the step (`---`), a `<details>` block or
    a diff's chunk, or the file ends. A command's output may hold fences of its own (a Markdown
    file printed), and the export does not escape them."""
    if opened.startswith("```bash"):
        return True
    k = _next_filled(lines, j)
    return k == len(lines) or lines[k] == "---" or lines[k].startswith(("</details>", "**Chunk "))


def _next_filled(lines: list[str], j: int) -> int:
    """The index of the first line after `lines[j]` that is not blank (`len(lines)`: none is)."""
    k = j + 1
    while k < len(lines) and not lines[k].strip():
        k += 1
    return k


def _fence_spans(lines: list[str]) -> list[tuple[int, int | None]]:
    """The top-level fenced blocks of `lines`: the index of each one's opening line and of its
    closing line (None: it never closes; see `_cursor_fence_closes`)."""
    spans: list[tuple[int, int | None]] = []
    opened: int | None = None
    for j, line in enumerate(lines):
        if opened is None:
            if line.startswith("```"):
                opened = j
        elif line.rstrip() == "```" and _cursor_fence_closes(lines, j, lines[opened]):
            spans.append((opened, j))
            opened = None
    return spans if opened is None else [*spans, (opened, None)]


def _cursor_steps(text: str) -> list[list[str]]:
    """The steps of a SpecStory export of a Cursor chat: its lines between `---` lines outside
    fenced blocks, a turn's header line starting a step of its own, the export's title before the
    first turn left out, blank edges stripped."""
    lines = text.split("\n")
    fenced = {k for a, b in _fence_spans(lines) for k in range(a, len(lines) if b is None else b + 1)}
    steps: list[list[str]] = [[]]
    for j, line in enumerate(lines):
        if j not in fenced and (line == "---" or _CURSOR_TURN.match(line)):
            steps.append([])
            if line == "---":
                continue
        steps[-1].append(line)
    out = []
    for step in steps:
        joined = "\n".join(step).strip("\n")
        if joined.strip():
            out.append(joined.split("\n"))
    start = next((i for i, s in enumerate(out) if _CURSOR_TURN.match(s[0])), len(out))
    return out[start:]


def _fences(lines: list[str]) -> list[str]:
    """The texts of the top-level fenced blocks of `lines` that close, in order (`_fence_spans`)."""
    return ["\n".join(lines[a + 1 : b]) for a, b in _fence_spans(lines) if b is not None]


def _cursor_call(name: str, body: list[str]) -> tuple[dict[str, Any], str]:
    """(arguments, result) of a Cursor tool step (`body`: its lines after the `Tool use:` line).
    A terminal command is its bash block, its output the fenced blocks after it; a file read is the
    path of its `Read file:` line (the export keeps no file's text: the result is empty); an edit,
    a todo list or a deletion is the model's (`_CURSOR_WRITES`: the step's text the arguments, the
    result empty, the export keeping none); a search, a listing or a lint check is its summary line,
    its result the table under it. A call the user stopped is `Cancelled`, its result that word."""
    text = "\n".join(body).strip()
    if text == "Cancelled":
        return {}, "Cancelled"
    if name == "run_terminal_cmd":
        blocks = _fences(body)
        return {"command": blocks[0] if blocks else text}, "\n".join(blocks[1:])
    read = next((line[len("Read file: ") :] for line in body if line.startswith("Read file: ")), None)
    if read is not None:
        return {"target_file": read}, ""
    if name in _CURSOR_WRITES:
        return ({"content": text} if text else {}), ""
    summary = re.search(r"<summary>(.*?)</summary>", text, re.S)
    if summary is None:
        return {}, text
    rest = (text[: summary.start()] + text[summary.end() :]).replace("<details>", "").replace("</details>", "")
    return {"query": summary.group(1).strip()}, rest.strip()


class _ChatReplies:
    """Chat messages built step by step from an exported transcript (Cursor's, Qwen Code's): the
    model's texts up to its calls one assistant message, the calls after them (up to its next
    text) that message's `tool_calls`, their results tool messages right after it."""

    def __init__(self, system: str, ids: str = "call_{}", ensure_ascii: bool = True) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        self.reply: dict[str, Any] | None = None
        self.results: list[dict[str, Any]] = []
        self.ids, self.ensure_ascii = ids, ensure_ascii
        self.numbers = itertools.count()

    def user(self, said: str) -> None:
        self.close()
        if said:
            self.messages.append({"role": "user", "content": said})

    def text(self, said: str) -> None:
        """The model's words: a new reply after calls, else more of the open one."""
        if not said:
            return
        if self.reply is not None and "tool_calls" in self.reply:
            self.close()
        if self.reply is None:
            self.reply = {"role": "assistant", "content": said}
        else:
            self.reply["content"] = f"{self.reply['content']}\n\n{said}" if self.reply["content"] else said

    def call(self, name: str, args: Any, result: str) -> None:
        call_id = self.ids.format(next(self.numbers))
        if self.reply is None:
            self.reply = {"role": "assistant", "content": None}
        self.reply.setdefault("tool_calls", []).append(_call(call_id, name, args, ensure_ascii=self.ensure_ascii))
        self.results.append({"role": "tool", "tool_call_id": call_id, "content": result})

    def close(self) -> None:
        if self.reply is not None:
            self.messages += [self.reply, *self.results]
        self.reply, self.results = None, []

    def done(self) -> list[dict[str, Any]]:
        """The messages, ending on a request (the model's last reply was no request's)."""
        self.close()
        _drop_trailing_replies(self.messages)
        return self.messages


def cursor(text: str, model: str = "gpt-4.1") -> dict[str, Any]:
    """A chat body from a Cursor agent chat as SpecStory exports it to Markdown (`.specstory/history/*.md`,
    its September 2025 layout: `_**User (...)**_` and `_**Assistant (...)**_` turns, each step of a
    turn between `---` lines, a call a `Tool use: **name**` step; `_cursor_steps`). The user's
    steps are user messages; an assistant's text (its `<think>` blocks left out: Cursor does not
    send past reasoning back) an assistant message, and the calls after it, up to the next text,
    that message's tool calls, their results (`_cursor_call`) the tool messages after it. The
    export keeps no file read's or write's result and no system prompt, tool schemas or model:
    empty results, a one-line system prompt, object schemas of the arguments used and `model`
    stand in. Home paths, e-mail addresses and credentials pseudonymised."""
    replies = _ChatReplies("You are Cursor's coding agent.", ensure_ascii=False)
    role = "user"
    for step in _cursor_steps(text):
        turn = _CURSOR_TURN.match(step[0])
        if turn:
            role = turn.group(1).lower()
            replies.close()
            step = "\n".join(step[1:]).strip("\n").split("\n")
        tool = _CURSOR_TOOL.match(step[0]) if step else None
        if role == "user":
            replies.user("\n".join(step).strip())
        elif tool:
            args, result = _cursor_call(tool.group(1), step[1:])
            replies.call(tool.group(1), args, result)
        else:
            replies.text(_CURSOR_THINK.sub("", "\n".join(step)).strip())
    messages = replies.done()
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": _scrubbed(messages)}


_ZED_TURN = re.compile(r"^## (User|Assistant)(?: \(checkpoint\))?$")
_ZED_CALL = re.compile(r"^\*\*Tool Call: (.*)\*\*$")
_ZED_STATUS = re.compile(r"^Status: (\w+)$")
# the lines a tool result's fenced block is closed before: the next turn or call, a search
# result's next file or hit (`## Matches in ...`, `### L12-20`, `### outline › L12-20`)
_ZED_BOUNDARY = re.compile(
    r"^(## (User|Assistant)( \(checkpoint\))?$|\*\*Tool Call: |## Matches in |### (.* › )?L\d+(-\d+)?$)"
)


def _zed_steps(text: str) -> list[tuple[str, str, list[str]]]:
    """The steps of a Zed agent thread exported as Markdown: ("User" | "Assistant", "", its lines)
    for a turn's header and the text after it, ("call", the call's label, its result's lines) for
    a `**Tool Call: label**` line with its `Status:` line, each outside fenced blocks. A fence in
    the model's or the user's text closes at its next ``` line; one in a tool's result (a file
    read, a command's output, a diff, a search hit) only where the next line that is not blank is a
    boundary (`_ZED_BOUNDARY`) or the file ends: results quote files and earlier threads, fences
    and all, and the export does not escape them. Text after a call's result, before the next
    turn, goes with that result (the export does not tell them apart)."""
    lines = text.split("\n")
    steps: list[tuple[str, str, list[str]]] = []
    fence: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is not None:
            if line.rstrip() == "```":
                k = _next_filled(lines, i)
                if steps[-1][0] != "call" or k == len(lines) or _ZED_BOUNDARY.match(lines[k]):
                    fence = None
            steps[-1][2].append(line)
        elif turn := _ZED_TURN.match(line):
            steps.append((turn.group(1), "", []))
        elif (call := _ZED_CALL.match(line)) and i + 1 < len(lines) and _ZED_STATUS.match(lines[i + 1]):
            steps.append(("call", call.group(1), []))
            i += 1
        elif steps:
            fence = i if line.startswith("```") else None
            steps[-1][2].append(line)
        i += 1
    if fence is not None:
        raise ValueError(f"a fenced block opened at line {fence + 1} never closes")
    return steps


# a call's label as the export writes it -> the tool of Zed's agent it names and its input's keys
_ZED_TOOLS = [
    (re.compile(r"^Search files for regex `(.*)`$"), "grep", ("regex",)),
    (re.compile(r"^Read file `(.*?)`(?: \(lines (\d+)-(\d+)\))?$"), "read_file", ("path", "start_line", "end_line")),
    (re.compile(r"^List the `(.*)` directory's contents$"), "list_directory", ("path",)),
    (re.compile(r"^Check diagnostics for `(.*)`$"), "diagnostics", ("path",)),
    (re.compile(r"^Check project diagnostics$"), "diagnostics", ()),
    (re.compile(r"^Create directory `(.*)`$"), "create_directory", ("path",)),
    (re.compile(r"^Delete “`(.*)`”$"), "delete_path", ("path",)),
    (re.compile(r"^Move `(.*)` to `(.*)`$"), "move_path", ("source_path", "destination_path")),
    (re.compile(r"^\d+ match(?:es)?$"), "find_path", ()),
    (re.compile(r"^`(.*)`$"), "terminal", ("command",)),
    (re.compile(r"^([\w.][\w./-]*)$"), "edit_file", ("path",)),
]


def _zed_call(label: str, body: str) -> tuple[str, dict[str, Any], str]:
    """(tool, input, result) of a Zed call from its label and the text the export shows under it:
    the input rebuilt from the label (`_ZED_TOOLS`: a path, a regex, a command; an edit names its
    file only, Zed's edit agent writing the text), the result that text; the `thinking` tool's text
    is its input, its result Zed's line. A label of no known tool is an `other` call of it."""
    if label == "Thinking":
        return "thinking", {"content": body}, "Finished thinking."
    for pattern, tool, keys in _ZED_TOOLS:
        found = pattern.match(label)
        if found:
            args = {k: v for k, v in zip(keys, found.groups()) if v is not None}
            if tool == "terminal":
                args["cd"] = "."
            if tool == "edit_file":
                args.update(display_description="", mode="edit")
            return tool, args, body
    return "other", {"label": label}, body


def zed(text: str, model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:
    """An Anthropic /v1/messages body from a thread of Zed's agent exported as Markdown (`## User`
    and `## Assistant` turns, each call a `**Tool Call: label**` line, its `Status:` line and its
    result; `_zed_steps`). A user turn is a user message; an assistant's text an assistant
    message, and the calls after it, up to the next text, that message's `tool_use` blocks, their
    results (`_zed_call`) the next user message's `tool_result` blocks. The export keeps no system
    prompt, tool schemas, model or call inputs beyond the labels: a one-line system prompt, object
    schemas of the inputs rebuilt and `model` stand in. Home paths pseudonymised."""
    messages: list[dict[str, Any]] = []
    reply: dict[str, Any] | None = None
    results: list[dict[str, Any]] = []
    numbers = itertools.count()

    def close() -> None:
        nonlocal reply
        if reply is not None:
            messages.append(reply)
            if results:
                messages.append({"role": "user", "content": list(results)})
        reply = None
        results.clear()

    for kind, label, lines in _zed_steps(text):
        said = "\n".join(lines).strip()
        if kind == "call":
            tool, args, result = _zed_call(label, said)
            call_id = f"toolu_{next(numbers):04d}"
            if reply is None:
                reply = {"role": "assistant", "content": []}
            reply["content"].append({"type": "tool_use", "id": call_id, "name": tool, "input": args})
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": result})
            continue
        close()
        if not said:
            continue
        if kind == "User":
            messages.append({"role": "user", "content": [{"type": "text", "text": said}]})
        else:
            reply = {"role": "assistant", "content": [{"type": "text", "text": said}]}
    close()
    merged = _merged_turns(messages)
    _drop_trailing_replies(merged)
    return {
        "model": model,
        "system": "You are Zed's agent, a coding agent in the editor.",
        "tools": _input_schemas_of_calls(merged),
        "messages": _scrubbed(merged),
    }


def qcli(save: dict[str, Any], model: str = "claude-sonnet-4-20250514") -> dict[str, Any]:
    """An Anthropic /v1/messages body from a conversation Amazon Q Developer CLI saved (`/save`: its
    `history`, one entry per exchange, a user message and the assistant's answer; its `tools`, the
    specifications it sent). A prompt is a user text; a `ToolUse` answer an assistant message, its
    text and its `tool_use` blocks; the results (`ToolUseResults`, or `CancelledToolUses` with the
    prompt the CLI adds) the next user message's `tool_result` blocks, a `Json` part (a command's
    exit status and output) as its JSON text, an `Error` status with `is_error`; a `Response` an
    assistant text. The save keeps no system prompt (the CLI's context files, if any, went as
    `additional_context`, kept where present): a one-line system prompt stands in."""
    messages: list[dict[str, Any]] = []
    for entry in save.get("history") or []:
        user, answer = (entry.get("user"), entry.get("assistant")) if isinstance(entry, dict) else entry
        content = user.get("content") or {}
        blocks: list[dict[str, Any]] = []
        if user.get("additional_context"):
            blocks.append({"type": "text", "text": user["additional_context"]})
        ((kind, value),) = content.items()
        for result in value.get("tool_use_results") or [] if isinstance(value, dict) else []:
            parts = [
                p["Text"] if "Text" in p else json.dumps(p.get("Json"), ensure_ascii=False)
                for p in result.get("content") or []
            ]
            block = {"type": "tool_result", "tool_use_id": result["tool_use_id"], "content": "\n".join(parts)}
            if result.get("status") == "Error":
                block["is_error"] = True
            blocks.append(block)
        prompt = value.get("prompt") if isinstance(value, dict) else None
        if prompt:
            blocks.append({"type": "text", "text": prompt})
        if blocks:
            messages.append({"role": "user", "content": blocks})
        ((said, reply),) = answer.items()
        out = [{"type": "text", "text": reply["content"]}] if reply.get("content") else []
        out += [
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call.get("args") or {}}
            for call in reply.get("tool_uses") or []
        ]
        if out:
            messages.append({"role": "assistant", "content": out})
    _drop_trailing_replies(messages)
    tools = [
        {"name": t["name"], "description": t.get("description", ""), "input_schema": t["input_schema"]["json"]}
        for spec in (save.get("tools") or {}).values()
        for t in (s.get("ToolSpecification") or {} for s in spec)
        if t
    ]
    return {
        "model": model,
        "system": "You are Amazon Q, an AI assistant built by AWS, in the user's terminal.",
        "max_tokens": 64000,
        "tools": tools,
        "messages": _scrubbed(messages),
    }


_QWEN_TOOLS = {
    "ReadFile": "read_file",
    "Shell": "run_shell_command",
    "Edit": "edit",
    "WriteFile": "write_file",
    "ListFiles": "list_directory",
    "Glob": "glob",
    "Grep": "grep_search",
    "TodoWrite": "todo_write",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
    "ReadManyFiles": "read_many_files",
    "SaveMemory": "save_memory",
}


def _qwen_marker(line: str) -> bool:
    """Whether `line` starts a turn or a call of a Qwen Code export."""
    return line in ("## User", "## Assistant") or line.startswith("### Tool: ")


def _qwen_fence_end(lines: list[str], start: int) -> int:
    """The index of the line closing the fence opened at `lines[start]` (`len(lines)`: none
    does): the first line of as many backticks or more and nothing else. The export opens a
    fence with more backticks than any run inside it (a file it quotes may hold fences)."""
    opened = len(lines[start]) - len(lines[start].lstrip("`"))
    for j in range(start + 1, len(lines)):
        closing = lines[j].strip()
        if len(closing) >= opened and closing == "`" * len(closing):
            return j
    return len(lines)


def _qwen_steps(text: str) -> list[tuple[str, list[str]]]:
    """A Qwen Code export's steps in order: ("User" | "Assistant", its lines) or ("call", the
    lines of one `### Tool:` block); a fenced block is read whole (`_qwen_fence_end`), so a
    marker inside a file it quotes starts nothing."""
    lines = text.split("\n")
    steps: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines) and not _qwen_marker(lines[i]):
        i += 1
    while i < len(lines):
        line = lines[i]
        kind = "call" if line.startswith("### Tool: ") else line[3:]
        body = [line] if kind == "call" else []
        i += 1
        while i < len(lines) and not _qwen_marker(lines[i]):
            end = min(_qwen_fence_end(lines, i), len(lines) - 1) if lines[i].startswith("```") else i
            body += lines[i : end + 1]
            i = end + 1
        steps.append((kind, body))
    return steps


def _qwen_call(body: list[str]) -> tuple[str, dict[str, Any], str, bool]:
    """(tool name, arguments, result as the model got it, whether it failed) of one `### Tool:`
    block: its `**Input:**` JSON and its `**Output:**` fence. An edit's or a write's output is the
    diff the terminal showed, not what the model got: the tool's confirmation stands in."""
    display = body[0][len("### Tool: ") :].split(":", 1)[0].strip()
    name = _QWEN_TOOLS.get(display, re.sub(r"(?<!^)(?=[A-Z])", "_", display).lower())
    failed = any(line.strip() == "**Status**: failed" for line in body[:3])
    args: dict[str, Any] = {}
    result = ""
    for j, line in enumerate(body):
        if line == "**Input:**":
            k = next(k for k in range(j + 1, len(body)) if body[k].startswith("```"))
            args = json.loads("\n".join(body[k + 1 : _qwen_fence_end(body, k)]))
        elif line == "**Output:**":
            rest = body[j + 1 :]
            fence = next((k for k, r in enumerate(rest) if r.startswith("```")), None)
            if any(r.startswith("*Diff for ") for r in rest[: fence or 0]):
                path = args.get("file_path") or args.get("absolute_path") or ""
                result = (
                    f"Successfully created and wrote to new file: {path}."
                    if name == "write_file"
                    else f"Successfully modified file: {path} (1 replacements)."
                )
            elif fence is not None:
                result = "\n".join(rest[fence + 1 : _qwen_fence_end(rest, fence)])
            else:
                result = "\n".join(rest).strip()
            break
    return name, args, result, failed


def crewai(cassette: dict[str, Any]) -> dict[str, Any]:
    """A CrewAI agent's chat requests as a VCR cassette of its tests recorded them (each request's
    body as POSTed to `/v1/chat/completions`, each answer's body, gzipped where the server sent it
    so): every request as sent (`x_requests`), the last one's answer after it. CrewAI's ReAct loop
    (tools described in the system prompt, no `tools` sent) appends each observation as an
    assistant message after the model's action, so every request ends with the model's role."""
    calls: list[tuple[dict[str, Any], Any]] = []
    for interaction in cassette["interactions"]:
        request = interaction["request"]
        if "chat/completions" not in request.get("uri", ""):
            continue
        calls.append((json.loads(request["body"]), _cassette_answer(interaction.get("response") or {})))
    last, answer = calls[-1]
    reply = answer["choices"][0]["message"]
    return {
        "model": last["model"],
        "tools": last.get("tools") or [],
        "messages": [*last["messages"], {"role": "assistant", "content": reply.get("content")}],
        "x_requests": _as_sent([body["messages"] for body, _ in calls]),
    }


def langgraph(cassette: dict[str, Any]) -> dict[str, Any]:
    """A LangGraph graph's Anthropic requests as the VCR cassette of its docs' notebook recorded
    them (each request's body as POSTed to `/v1/messages`, each answer's, gzipped as sent): every
    request as sent (`x_requests`), the last one's answer after it. Agents of a graph that hand the
    conversation to one another each send it with their own system prompt and tools: each distinct
    one once (`x_systems`, `x_toolsets`), and which one each request went with (`x_request_system`,
    `x_request_tools`: `bench.cache.requests` sends them so). A request the provider refused
    (overloaded) and the client sent again is there twice, as recorded."""
    calls: list[tuple[dict[str, Any], Any]] = []
    for interaction in cassette["interactions"]:
        request = interaction["request"]
        if "/v1/messages" not in request.get("uri", ""):
            continue
        raw = request["body"].get("string") if isinstance(request["body"], dict) else request["body"]
        calls.append((json.loads(raw), _cassette_answer(interaction.get("response") or {})))
    systems: list[Any] = []
    toolsets: list[Any] = []
    for body, _ in calls:
        for table, value in ((systems, body.get("system")), (toolsets, body.get("tools") or [])):
            if value not in table:
                table.append(value)
    last, answer = calls[-1]
    return {
        "model": last["model"],
        "system": last.get("system"),
        "tools": last.get("tools") or [],
        "messages": [*last["messages"], {"role": "assistant", "content": answer["content"]}],
        "x_requests": _as_sent([body["messages"] for body, _ in calls]),
        "x_systems": systems,
        "x_request_system": [systems.index(body.get("system")) for body, _ in calls],
        "x_toolsets": toolsets,
        "x_request_tools": [toolsets.index(body.get("tools") or []) for body, _ in calls],
    }


def langgraph_cassette(text: str) -> dict[str, Any]:
    """A cassette of LangGraph's docs (`docs/cassettes/*.msgpack.zlib`: base64 of zlib of msgpack;
    reading it needs `pip install msgpack`)."""
    import base64
    import zlib

    import msgpack  # type: ignore[import-not-found]

    return msgpack.unpackb(zlib.decompress(base64.b64decode(text)), raw=False, strict_map_key=False)  # type: ignore[no-any-return]


def _cassette_answer(response: dict[str, Any]) -> Any:
    """A recorded answer's JSON body (vcrpy keeps it as text, or as bytes, gzipped as sent)."""
    body = response.get("body")
    raw = body.get("string") if isinstance(body, dict) else body if body is not None else response.get("content")
    if isinstance(raw, bytes):
        raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        raw = raw.decode()
    return json.loads(raw)


def qwen(text: str, model: str = "dashscope/qwen3-coder-plus") -> dict[str, Any]:
    """An OpenAI chat body from a Qwen Code session exported as Markdown (`/export md`: `## User`
    and `## Assistant` turns, each call a `### Tool: Name: label` block with its `**Status**`,
    `**Input:**` JSON and `**Output:**`; `_qwen_steps`). A user turn is a user message (the files
    it references inlined, as sent); the assistant's texts up to a call or the next turn one
    assistant message, the calls after it, up to the next text, its `tool_calls`, their results
    (`_qwen_call`) tool messages. The export keeps no system prompt or tool schemas: a one-line
    system prompt and schemas of the arguments used stand in. Home paths pseudonymised."""
    replies = _ChatReplies("You are Qwen Code, an interactive CLI agent.", ids="call_{:04d}")
    for kind, body in _qwen_steps(text):
        if kind == "call":
            name, args, result, failed = _qwen_call(body)
            replies.call(name, args, f"Error: {result}" if failed else result)
            continue
        said = "\n".join(body).strip()
        if kind == "Assistant" and replies.reply is not None and "tool_calls" not in replies.reply:
            replies.text(said)  # (the model's texts before its calls are one message)
            continue
        replies.close()  # (a turn's heading ends the reply before it, calls and all)
        if kind == "User":
            replies.user(said)
        else:
            replies.text(said)
    messages = replies.done()
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": _scrubbed(messages)}


def _tsx_text(value: Any) -> str:
    """A tool result as GitHub Copilot Chat's export holds it (`{"content": [{"value": ...}]}`, each
    value a string or a prompt-tsx node tree: elements with `children`, text nodes of `type` 2 with
    `text` and `lineBreakBefore`) as the text it rendered into: the text nodes in order, a line
    break before those that ask for one and between the root's own children (checked against a
    request VS Code logged as sent: a search result's header, its matches, each match's lines)."""

    def walk(node: Any, out: list[str]) -> None:
        if isinstance(node, dict) and node.get("type") == 2:
            text = node.get("text") or ""
            if node.get("lineBreakBefore") and out and not out[-1].endswith("\n"):
                out.append("\n")
            out.append(text)
        elif isinstance(node, dict):
            for child in node.get("children") or []:
                walk(child, out)

    parts: list[str] = []
    for item in value.get("content") or []:
        inner = item.get("value")
        if isinstance(inner, str):
            parts.append(inner)
        elif isinstance(inner, dict) and isinstance(inner.get("node"), dict):
            pieces: list[str] = []
            for child in inner["node"].get("children") or []:
                if pieces and not pieces[-1].endswith("\n"):
                    pieces.append("\n")
                walk(child, pieces)
            parts.append("".join(pieces))
    return "".join(parts)


def replay_text(message: dict[str, Any]) -> str:
    """The text of a message VS Code's chat replay export logged as sent (`requestMessages`): its
    text parts (`type` 1) joined; stateful markers (2) and cache breakpoints (3) are no text."""
    return "".join(part.get("text", "") for part in message.get("content") or [] if part.get("type") == 1)


def replay_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas as VS Code's chat replay export logs them (`metadata.tools`) as chat
    completions function tools."""
    return [
        {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters") if k in t}}
        for t in tools
    ]


def vscode(export: dict[str, Any], replay: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat body from a GitHub Copilot Chat session in VS Code (agent mode), as its "Export
    Session" JSON holds it: per request (a user turn), the context and message Copilot rendered
    (`result.metadata.renderedGlobalContext`, `renderedUserMessage`), its tool-call rounds (each the
    model's text and calls) and their results (`toolCallResults`, `_tsx_text`). Sent as Copilot
    sends a conversation: the system prompt, the global context and the user's message as two user
    messages, each round an assistant message and each result a tool message; a later request
    after the earlier ones' rounds. The export holds neither system prompt nor tool schemas: those
    of a request VS Code logged in a chat replay export of the same extension (`replay`: GPT-5.1's
    prompt and its 36 tools) stand in, with object schemas of the arguments used for tools not in
    it (MCP servers' tools, Claude's edit tools)."""
    logged = next(log for prompt in replay["prompts"] for log in prompt["logs"] if log.get("kind") == "request")
    system = replay_text(logged["requestMessages"]["messages"][0])
    tools = replay_tools(logged["metadata"]["tools"])
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for request in export["requests"]:
        meta = (request.get("result") or {}).get("metadata") or {}
        rendered = meta.get("renderedUserMessage")
        if not rendered:  # (a request cancelled before the model was asked)
            continue
        for part in (meta.get("renderedGlobalContext") or [], rendered):
            text = "".join(p.get("text", "") for p in part if isinstance(p, dict))
            if text:
                messages.append({"role": "user", "content": text})
        results = meta.get("toolCallResults") or {}
        for round_ in meta.get("toolCallRounds") or []:
            calls = [c for c in round_.get("toolCalls") or [] if c["id"] in results]
            out: dict[str, Any] = {"role": "assistant", "content": round_.get("response") or None}
            if calls:
                out["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls
                ]
            messages.append(out)
            messages += [
                {"role": "tool", "tool_call_id": c["id"], "content": _tsx_text(results[c["id"]])} for c in calls
            ]
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    known = {t["function"]["name"] for t in tools}
    tools += [t for t in _schemas_of_calls(messages) if t["function"]["name"] not in known]
    return {"model": model, "tools": tools, "messages": messages}


def toolathlon(run: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat body from a Toolathlon trajectory (`trajs/<model>_<task>.json`: `messages` in OpenAI
    chat form, an MCP agent of the OpenAI Agents SDK calling `server-tool` names, parallel calls;
    a result over the agent's limit is stored as the preview it sent, the rest behind its
    `local-view_overlong_tooloutput` tool): each message's role, text, calls and call id as
    stored, the last reply gone. The system prompt and tool schemas are not stored: a one-line
    stand-in, and schemas of the arguments used."""
    sent = ("role", "content", "tool_calls", "tool_call_id")
    messages = [{k: m[k] for k in sent if k in m} for m in run["messages"]]
    _drop_trailing_replies(messages)
    system = {"role": "system", "content": "You are a helpful assistant that completes tasks with the tools given."}
    return {"model": model, "tools": _schemas_of_calls(messages), "messages": [system, *_scrubbed(messages)]}


# pi's default system prompt and tools as its coding agent built them in November 2025
# (badlogic/pi-mono, MIT, `38524ea9006cfb06991e18d84aa9c8483010363c`: packages/coding-agent/src/main.ts
# `buildSystemPrompt`, tools/*.ts), with the project's AGENTS.md of that commit as its context
# file; the user's global context file, if any, is not public, and the date stands in
PI_SYSTEM = """You are actually not Claude, you are Pi. You are an expert coding assistant. You help users with coding tasks by reading files, executing commands, editing code, and writing new files.

Available tools:
- read: Read file contents
- bash: Execute bash commands (ls, grep, find, etc.)
- edit: Make surgical edits to files (find exact text and replace)
- write: Create or overwrite files

Guidelines:
- Always use bash tool for file operations like ls, grep, find
- Use read to examine files before editing
- Use edit for precise changes (old text must match exactly)
- Use write only for new files or complete rewrites
- Be concise in your responses
- Show file paths clearly when working with files
- When summarizing your actions, output plain text directly - do NOT use cat or bash to display what you did

Documentation:
- Your own documentation (including custom model setup and theme creation) is at: /Users/user/workspaces/pi-mono/packages/coding-agent/README.md
- Read it when users ask about features, configuration, or setup, and especially if the user asks you to add a custom model or provider, or create a custom theme.

# Project Context

The following project context files have been loaded:

## /Users/user/workspaces/pi-mono/AGENTS.md

- When receiving the first user message, you MUST read README.md in full. Then ask the user which module(s) they want to work on. Then you MUST read the corresponding README.md files in full, in parallel:
    - packages/ai/README.md
    - packages/tui/README.md
    - packages/agent/README.md
    - packages/coding-agent.md
    - packages/pods/README.md
    - packages/web-ui/README.md
- We must NEVER have type `any` anywhere, unless absolutely, positively necessary.
- If you are working with an external API, check node_modules for the type definitions as needed instead of assuming things.
- Always run `npm run check` in the project's root directory after making code changes.
- You must NEVER run `npm run dev` yourself. Doing is means you failed the user hard.
- Do NOT commit unless asked to by the user
- Keep you answers short and concise and to the point.
- Do NOT use inline imports ala `await import("./theme/theme.js");`



Current date and time: Thursday, November 20, 2025 at 03:33:50 PM PST
Current working directory: /Users/user/workspaces/pi-mono"""


def _pi_tool(name: str, description: str, props: dict[str, tuple[str, str]], required: list[str]) -> dict[str, Any]:
    properties = {key: {"type": kind, "description": text} for key, (kind, text) in props.items()}
    schema = {"type": "object", "properties": properties, "required": required}
    return {"name": name, "description": description, "input_schema": schema}


PI_TOOLS = [
    _pi_tool(
        "read",
        "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as "
        "attachments. For text files, defaults to first 2000 lines. Use offset/limit for large files.",
        {
            "path": ("string", "Path to the file to read (relative or absolute)"),
            "offset": ("number", "Line number to start reading from (1-indexed)"),
            "limit": ("number", "Maximum number of lines to read"),
        },
        ["path"],
    ),
    _pi_tool(
        "bash",
        "Execute a bash command in the current working directory. Returns stdout and stderr. Optionally provide a "
        "timeout in seconds.",
        {
            "command": ("string", "Bash command to execute"),
            "timeout": ("number", "Timeout in seconds (optional, no default timeout)"),
        },
        ["command"],
    ),
    _pi_tool(
        "edit",
        "Edit a file by replacing exact text. The oldText must match exactly (including whitespace). Use this for "
        "precise, surgical edits.",
        {
            "path": ("string", "Path to the file to edit (relative or absolute)"),
            "oldText": ("string", "Exact text to find and replace (must match exactly)"),
            "newText": ("string", "New text to replace the old text with"),
        },
        ["path", "oldText", "newText"],
    ),
    _pi_tool(
        "write",
        "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically "
        "creates parent directories.",
        {
            "path": ("string", "Path to the file to write (relative or absolute)"),
            "content": ("string", "Content to write to the file"),
        },
        ["path", "content"],
    ),
]


def _pi_kept_calls(history: list[dict[str, Any]], api: str = "anthropic-messages") -> list[dict[str, Any]]:
    """pi's `transformMessages`: each assistant message but the last keeps only the tool calls
    that a result answers before the next assistant message (an aborted turn's calls go); an
    assistant message of another API than `api` has its thinking as text."""
    out = []
    for i, msg in enumerate(history):
        if msg["role"] == "assistant":
            parts = msg.get("content") or []
            if msg.get("api") != api:
                parts = [
                    {"type": "text", "text": f"<thinking>\n{p['thinking']}\n</thinking>"}
                    if p.get("type") == "thinking"
                    else p
                    for p in parts
                ]
            if i < len(history) - 1:
                answered = set()
                for later in history[i + 1 :]:
                    if later["role"] == "assistant":
                        break
                    if later["role"] == "toolResult":
                        answered.add(later["toolCallId"])
                parts = [p for p in parts if p.get("type") != "toolCall" or p["id"] in answered]
            msg = {**msg, "content": parts}
        out.append(msg)
    return out


def _pi_history(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A pi session's messages (its `message` lines of role `user`, `assistant` or `toolResult`), in order."""
    history = [line["message"] for line in lines if line.get("type") == "message"]
    return [m for m in history if m.get("role") in ("user", "assistant", "toolResult")]


def pi(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """An Anthropic /v1/messages body from a session of pi's coding agent (`~/.pi/agent/sessions`,
    JSONL: a `session` line, `message` lines of role `user`, `assistant` (parts `text`, `thinking`,
    `toolCall`, its usage) or `toolResult`, and settings changes), built the way pi's Anthropic
    provider of November 2025 built each request (`convertMessages` of the commit above):
    `transformMessages` first (`_pi_kept_calls`), then blank text and empty messages left out, a
    tool call as `tool_use`, consecutive tool results as one user message of `tool_result` blocks
    (their text joined by newlines, `is_error` as stored), thinking without a signature as text.
    pi also marks the last user block of each request with `cache_control` (left out here: a
    client moving its breakpoint is `bench.clients`' `breakpoints`). The system prompt and tool
    schemas are pi's own of that time (`PI_SYSTEM`, `PI_TOOLS`). Home paths are pseudonymised."""
    history = _pi_history(lines)
    messages: list[dict[str, Any]] = []
    for msg in _pi_kept_calls(history):
        role = msg["role"]
        if role == "toolResult":
            text = "\n".join(p.get("text", "") for p in msg.get("content") or [] if p.get("type") == "text")
            block = {
                "type": "tool_result",
                "tool_use_id": msg["toolCallId"],
                "content": text,
                "is_error": msg["isError"],
            }
            if messages and messages[-1]["role"] == "user" and messages[-1]["content"][-1]["type"] == "tool_result":
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
            continue
        blocks: list[dict[str, Any]] = []
        content = msg.get("content")
        for p in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            kind = p.get("type")
            if kind == "text" and p["text"].strip():
                blocks.append({"type": "text", "text": p["text"]})
            elif kind == "thinking" and p["thinking"].strip():
                signature = p.get("thinkingSignature") or ""
                if signature.strip():
                    blocks.append({"type": "thinking", "thinking": p["thinking"], "signature": signature})
                else:
                    blocks.append({"type": "text", "text": f"<thinking>\n{p['thinking']}\n</thinking>"})
            elif kind == "toolCall" and role == "assistant":
                blocks.append({"type": "tool_use", "id": p["id"], "name": p["name"], "input": p.get("arguments") or {}})
        if blocks:
            messages.append({"role": role, "content": blocks})
    _drop_trailing_replies(messages)
    messages = _scrubbed(messages)
    model = next((line["modelId"] for line in lines if line.get("type") == "session"), "claude-sonnet-4-5")
    return {"model": model, "system": PI_SYSTEM, "max_tokens": 32000, "tools": PI_TOOLS, "messages": messages}


def pi_responses(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """A Responses API body from a session of pi's coding agent on its `openai-codex` provider
    (session version 3, as Entire commits it): the history as that provider sends it back, stateless:
    a user message's text as `input_text`, a reply as its items in order (its thinking as a
    `reasoning` item with the summary pi stored, whose `encrypted_content` the committed session
    redacts; its text as an assistant `message` of `output_text`; each tool call a `function_call`,
    pi's id `call|item` split into its `call_id` and `id`), each result a `function_call_output`.
    A reply that ended in a transport error goes, with its calls (the model's answer to it never
    arrived whole), and `_pi_kept_calls` as for the Anthropic provider. pi's instructions and tools of
    that time are not in the session: `PI_SYSTEM` and `PI_TOOLS` stand in. Home paths are
    pseudonymised."""
    history = _pi_history(lines)
    history = [m for m in history if not (m["role"] == "assistant" and m.get("stopReason") in ("error", "aborted"))]
    items: list[dict[str, Any]] = []
    for msg in _pi_kept_calls(history, "openai-codex-responses"):
        role, content = msg["role"], msg.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if role == "toolResult":
            text = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text")
            items.append({"type": "function_call_output", "call_id": msg["toolCallId"].split("|")[0], "output": text})
        elif role == "user":
            text = [{"type": "input_text", "text": p["text"]} for p in parts if p.get("type") == "text"]
            items.append({"role": "user", "content": text})
        else:
            for p in parts:
                kind = p.get("type")
                if kind == "thinking":
                    # (the stored item, as JSON; where the redaction left it unreadable, its id and
                    # the thinking pi kept, which is its summary's text)
                    signature = p.get("thinkingSignature") or "{}"
                    try:
                        stored = json.loads(signature)
                    except ValueError:
                        found = re.search(r'"id":"(rs_[^"]*)"', signature)
                        stored = {"id": found.group(1) if found else ""}
                    summary = stored.get("summary") or [{"type": "summary_text", "text": p["thinking"]}]
                    items.append({"type": "reasoning", "id": stored.get("id", ""), "summary": summary})
                elif kind == "text" and p["text"].strip():
                    said = [{"type": "output_text", "text": p["text"], "annotations": []}]
                    items.append({"type": "message", "role": "assistant", "content": said, "status": "completed"})
                elif kind == "toolCall":
                    call_id, _, item_id = p["id"].partition("|")
                    arguments = json.dumps(p.get("arguments") or {})
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call_id,
                            "id": item_id,
                            "name": p["name"],
                            "arguments": arguments,
                        }
                    )
    _drop_trailing_response_items(items)
    model = next((line["modelId"] for line in lines if line.get("type") == "model_change"), "gpt-5.5")
    tools = [
        {"type": "function", "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
        for t in PI_TOOLS
    ]
    return {"model": model, "instructions": PI_SYSTEM, "tools": tools, "input": _scrubbed(items), "store": False}


def write_gz(target: Path, data: Any) -> None:
    """`data` as compact JSON, gzipped, the way every corpus file is written (mtime 0: the same
    bytes from the same input)."""
    with gzip.GzipFile(target, "wb", mtime=0) as f:
        f.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


def _write(out: Path, name: str, body: dict[str, Any], source: str) -> None:
    body = {**body, "x_source": source}
    target = out / f"{name}.json.gz"
    write_gz(target, body)
    print(target, len(body.get("messages") or body.get("input") or []), "messages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "family",
        choices=[
            "openhands",
            "sweagent",
            "moatless",
            "moatless_requests",
            "tau2",
            "taubench",
            "livemcp",
            "spider2",
            "codex",
            "claudecode",
            "sweagent0",
            "cline",
            "smolagents",
            "aider",
            "roo",
            "kimi",
            "gemini",
            "hermes",
            "terminus",
            "copilot",
            "opencode",
            "trae",
            "crush",
            "goose",
            "mcpmark",
            "nyuctf",
            "minisweagent",
            "pi",
            "deerflow",
            "toolathlon",
            "vscode",
            "letta",
            "pi_responses",
            "amp",
            "cursor",
            "zed",
            "qcli",
            "qwen",
            "crewai",
            "langgraph",
            "tapeagents",
        ],
    )
    parser.add_argument("raw", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--tools", type=Path)
    parser.add_argument("--prompts", type=Path)
    parser.add_argument("--tools-source", type=Path, help="tau2, livemcp: the Python source declaring the tools")
    parser.add_argument(
        "--prompts-source",
        type=Path,
        help="tau2, deerflow: the agent's Python source with its prompts; vscode: a chat replay export (its system prompt and tools)",
    )
    parser.add_argument("--model", default=None, help="the model the run used, where the file does not say")
    parser.add_argument("--system-from", type=Path, help="openhands: a run whose system event the others lack")
    parser.add_argument("--pick", nargs="*", default=None, help="only these instance/simulation ids")
    parser.add_argument("--prefix", default="")
    parser.add_argument(
        "--reasoning", action="store_true", help="deerflow: the replies' reasoning goes back (PatchedChatDeepSeek)"
    )
    parser.add_argument(
        "--tag", help="gemini, copilot, opencode, trae, goose: the loop's name (default: from the file's path)"
    )
    args = parser.parse_args()
    for path in args.raw:
        text = _open(path) if args.family not in ("crush", "tapeagents") else ""  # (databases: read below)
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
        elif args.family == "moatless_requests":
            traj = json.loads(text)
            name = f"{args.prefix}moatless_requests__{path.parent.name}"
            _write(args.out, name, moatless_requests(traj), str(path))
        elif args.family == "taubench":
            tools = json.loads(args.tools.read_text())
            domain = path.stem.rsplit("-", 1)[-1]
            for run in json.loads(text):
                tag = f"{run['task_id']}:{run['trial']}"
                if args.pick is None or tag in args.pick:
                    name = f"{args.prefix}taubench__{domain}_{run['task_id']}_{run['trial']}"
                    _write(args.out, name, taubench(run, tools, args.model or "gpt-4o"), str(path))
        elif args.family == "livemcp":
            tools = livemcp_tools(args.tools_source.read_text())
            for task in json.loads(text):
                if args.pick is None or task["task_id"] in args.pick:
                    name = f"{args.prefix}livemcp__{task['task_id'][:8]}"
                    _write(args.out, name, livemcp(task, tools, args.model or "claude-sonnet-4-20250514"), str(path))
        elif args.family == "codex":
            session = path.stem.split("-")[-1][:8]
            _write(args.out, f"{args.prefix}codex__{session}", codex(text, args.model or "gpt-5.5"), str(path))
        elif args.family == "claudecode":
            _write(args.out, f"{args.prefix}claudecode__{path.stem.split('-')[-1][:8]}", claudecode(text), str(path))
        elif args.family == "sweagent0":
            name = f"{args.prefix}sweagent0__{path.name.removesuffix('.traj')}"
            _write(args.out, name, sweagent0(json.loads(text), args.model or "gpt-4-1106-preview"), str(path))
        elif args.family == "cline":
            name = (
                f"{args.prefix}cline__{path.parent.name if path.stem.startswith('api_') else path.stem.split('__')[-1]}"
            )
            _write(args.out, name, cline(json.loads(text), args.model or "claude-3-7-sonnet-20250219"), str(path))
        elif args.family == "smolagents":
            runs = [json.loads(line) for line in text.splitlines() if line.strip()]
            for i, run in enumerate(runs):
                tag = f"{run['agent_action_type']}_{run['source']}_{i}".lower().replace(" ", "")
                if args.pick is None or tag in args.pick:
                    name = f"{args.prefix}smolagents__{tag}"
                    _write(args.out, name, smolagents(run, args.model or run.get("model_id") or "gpt-4o"), str(path))
        elif args.family == "aider":
            name = f"{args.prefix}aider__{path.parent.name or path.stem}"
            _write(args.out, name, aider(text, args.model or "gpt-4o"), str(path))
        elif args.family == "roo":
            name = f"{args.prefix}roo__{path.stem}"
            _write(args.out, name, roo(_roo_json(text), args.model or "glm-5.1"), str(path))
        elif args.family == "kimi":  # <session id>.jsonl, a subagent's <session id>_read_N.jsonl
            name = f"{args.prefix}kimi__{path.stem[:8]}{path.stem[path.stem.find('_read_') :] if '_read_' in path.stem else ''}"
            _write(args.out, name, kimi(text, args.prompts_source.read_text()), str(path))
        elif args.family == "gemini":
            name = f"{args.prefix}gemini__{args.tag or path.stem[:24]}"
            history = json.loads(text)  # the history the CLI sends, or its chat recording
            contents = gemini_recording(history) if isinstance(history, dict) else history
            _write(args.out, name, gemini(contents, args.model or "gemini/gemini-3-flash-preview"), str(path))
        elif args.family in ("hermes", "terminus"):
            convert = hermes if args.family == "hermes" else terminus
            # NeMo Gym keeps an agent's or environment's rollouts as <its folder>/data/example_*.jsonl
            tag = path.parent.parent.name if path.name.startswith("example") else path.stem.split("_example")[0]
            for i, line in enumerate(line for line in text.splitlines() if line.strip()):
                if args.pick is None or str(i) in args.pick:
                    name = f"{args.prefix}{args.family}__{tag.removesuffix('_agent')}_{i}"
                    _write(args.out, name, convert(json.loads(line), args.model or "gpt-5-mini"), str(path))
        elif args.family == "copilot":  # Entire's checkpoint layout: <xx>/<id>/<n>/full.jsonl
            name = f"{args.prefix}copilot__{args.tag or path.parent.parent.name}"
            _write(args.out, name, copilot(text), str(path))
        elif args.family == "opencode":  # Entire's checkpoint layout: <xx>/<id>/<n>/full.jsonl
            name = f"{args.prefix}opencode__{args.tag or path.parent.parent.name}"
            _write(args.out, name, opencode(json.loads(text)), str(path))
        elif args.family == "trae":  # <run>/trajectory.json: the run's folder names it
            name = f"{args.prefix}trae__{args.tag or path.parent.name}"
            _write(args.out, name, trae(json.loads(text)), str(path))
        elif args.family == "tapeagents":  # tests/res/gaia_agent/tapedata.sqlite.gz
            for name, run in tapeagents_runs(path).items():
                if args.pick is None or name in args.pick:
                    _write(
                        args.out,
                        f"{args.prefix}tapeagents__{name}",
                        tapeagents(run, args.model or "gpt-4o-mini"),
                        str(path),
                    )
        elif args.family == "crush":  # .crush/crush.db (its -wal beside it, where there is one)
            for session, rows in crush_sessions(path, args.pick).items():
                _write(args.out, f"{args.prefix}crush__{session[:8]}", crush(rows), str(path))
        elif args.family == "goose":  # a session .jsonl, or a metacoder results .yaml of Goose runs
            for name, lines in goose_sessions(path, text, args.pick).items():
                _write(
                    args.out,
                    f"{args.prefix}goose__{args.tag or name}",
                    goose(lines, args.model or "claude-sonnet-4-20250514"),
                    str(path),
                )
        elif args.family == "mcpmark":  # <service>/<server>/run-N/<task>/messages.json, meta.json beside it
            meta_path = path.parent / "meta.json"
            meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
            model = args.model or meta.get("litellm_run_model_name") or "claude-sonnet-4-20250514"
            tag = "_".join((*path.parts[-5:-3], path.parts[-3].removeprefix("run-"), path.parts[-2]))
            _write(
                args.out, f"{args.prefix}mcpmark__{args.tag or tag[:64]}", mcpmark(json.loads(text), model), str(path)
            )
        elif args.family == "minisweagent":  # trajs/<instance>/<instance>.traj.json
            name = path.name.split(".traj")[0]
            _write(
                args.out,
                f"{args.prefix}minisweagent__{args.tag or name}",
                minisweagent(json.loads(text), args.model),
                str(path),
            )
        elif args.family == "pi":  # a session file of pi's coding agent
            lines = [json.loads(line) for line in text.splitlines() if line.strip()]
            _write(args.out, f"{args.prefix}pi__{args.tag or path.stem}", pi(lines), str(path))
        elif args.family == "pi_responses":  # XX/CHECKPOINT/0/full.jsonl (Entire, pi on openai-codex)
            lines = [json.loads(line) for line in text.splitlines() if line.strip()]
            _write(args.out, f"{args.prefix}pi__{args.tag or path.parent.parent.name}", pi_responses(lines), str(path))
        elif args.family == "amp":  # _threads/<NNN>_<title>.md
            name = f"{args.prefix}amp__{args.tag or path.stem.split('_')[0]}"
            _write(args.out, name, amp(text, args.model or "claude-sonnet-4-5-20250929"), str(path))
        elif args.family == "cursor":  # .specstory/history/<date>_<time>Z-<title>.md
            name = f"{args.prefix}cursor__{args.tag or path.stem[:16]}"
            _write(args.out, name, cursor(text, args.model or "gpt-4.1"), str(path))
        elif args.family == "zed":  # a thread exported as Markdown
            name = f"{args.prefix}zed__{args.tag or path.stem}"
            _write(args.out, name, zed(text, args.model or "claude-sonnet-4-5-20250929"), str(path))
        elif args.family == "qcli":  # a conversation saved by Amazon Q Developer CLI's /save
            name = f"{args.prefix}qcli__{args.tag or path.stem}"
            _write(args.out, name, qcli(json.loads(text), args.model or "claude-sonnet-4-20250514"), str(path))
        elif args.family == "qwen":  # a session exported by Qwen Code's /export md
            name = f"{args.prefix}qwen__{args.tag or path.stem}"
            _write(args.out, name, qwen(text, args.model or "dashscope/qwen3-coder-plus"), str(path))
        elif args.family == "crewai":  # a VCR cassette of CrewAI's tests (YAML)
            import yaml

            name = f"{args.prefix}crewai__{args.tag or path.stem.removeprefix('test_')}"
            _write(args.out, name, crewai(yaml.safe_load(text)), str(path))
        elif args.family == "langgraph":  # docs/cassettes/<notebook>_<id>.msgpack.zlib
            name = f"{args.prefix}langgraph__{args.tag or path.name.split('.')[0]}"
            _write(args.out, name, langgraph(langgraph_cassette(text)), str(path))
        elif args.family == "letta":  # agents/<owner>/<name>/<name>.af
            _write(args.out, f"{args.prefix}letta__{args.tag or path.stem}", letta(json.loads(text)), str(path))
        elif args.family == "deerflow":  # frontend/public/demo/threads/<id>/thread.json
            thread = json.loads(text)
            template = prompts_from_source(args.prompts_source.read_text())["SYSTEM_PROMPT_TEMPLATE"]
            name = f"{args.prefix}deerflow__{args.tag or path.parent.name[:8]}"
            model = args.model or "deepseek/deepseek-chat"
            _write(args.out, name, deerflow(thread, template, args.reasoning, model), str(path))
        elif args.family == "toolathlon":  # trajs/<model>_<task>.json
            model = args.model or (
                "claude-sonnet-4-5-20250929" if path.stem.startswith("claude") else "deepseek/deepseek-chat"
            )
            name = f"{args.prefix}toolathlon__{args.tag or path.stem[:64]}"
            _write(args.out, name, toolathlon(json.loads(text), model), str(path))
        elif args.family == "vscode":  # samples/<name>.json, an "Export Session" of VS Code's chat
            replay = json.loads(args.prompts_source.read_text())
            model = args.model or "claude-sonnet-4-5-20250929"
            _write(
                args.out,
                f"{args.prefix}vscode__{args.tag or path.stem}",
                vscode(json.loads(text), replay, model),
                str(path),
            )
        elif args.family == "nyuctf":  # transcripts/<agent>/<year>/<event>/<category>/<challenge>/conversation.*.json
            run = json.loads(text)
            tag = "_".join((path.parts[-3], path.parts[-2], path.stem.rsplit(".", 1)[-1]))
            _write(
                args.out,
                f"{args.prefix}nyuctf__{args.tag or re.sub(r'[^A-Za-z0-9_.-]+', '_', tag)}",
                nyuctf(run),
                str(path),
            )
        elif args.family == "spider2":
            for run in json.loads(text):
                name = f"{args.prefix}spider2__{run['instance_id']}"
                _write(args.out, name, spider2(run, args.model or "claude-3-7-sonnet-20250219"), str(path))
        else:
            data = json.loads(text)
            if args.tools_source:
                tools = {
                    data["info"]["environment_info"]["domain_name"]: schemas_from_source(args.tools_source.read_text())
                }
            else:
                tools = json.loads(args.tools.read_text())
            if args.prompts_source:
                prompts = prompts_from_source(args.prompts_source.read_text())
            else:
                prompts = json.loads(args.prompts.read_text())
            domain = data["info"]["environment_info"]["domain_name"]
            for sim in data["simulations"]:
                if args.pick is None or str(sim["task_id"]) in args.pick:
                    _write(
                        args.out,
                        f"{args.prefix}tau2__{domain}_{re.sub(r'[^A-Za-z0-9]+', '_', str(sim['task_id'])).strip('_')[:48]}",
                        tau2(sim, domain, data["info"], tools, prompts),
                        str(path),
                    )


if __name__ == "__main__":
    main()
