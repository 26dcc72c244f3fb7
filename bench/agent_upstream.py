"""A scripted coding model on 127.0.0.1 for driving real agents (Claude Code, Codex, OpenCode, Qwen Code) through the proxy.

It plays the model of a long file-reading session: every request of the agent's main loop is
answered with a tool call that reads the next of `files` workspace files (each starts with
`FILE NN of M`), until all were read; then with a final text. A request asking for a summary (the
agent's own compaction) is answered with a summary that says which files were read. Side calls
(titles, topics) get a short text. Like tests/e2e/upstream.py it counts each request's input with
a real tokenizer and refuses, as the provider would, a request whose input plus `max_tokens`
exceeds the window; usage reports that count, so an agent that compacts on reported usage sees it.

Protocols: Anthropic `/v1/messages` (streamed or not) for Claude Code; the OpenAI Responses API
`/v1/responses` (streamed) for Codex; OpenAI chat `/v1/chat/completions` (streamed or not, usage in
the last chunk) for OpenCode and Qwen Code (which streams). Which file comes next is server state (the highest
`FILE NN` seen in a tool result so far), so it survives the agent's compaction and the guard's cuts.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.e2e.upstream import JsonHandler, Server, _dump, input_tokens, responses_input_tokens

FILE_HEAD = re.compile(r"FILE (\d+) of (\d+)")
MARKER = "[context-guard:"
SUMMARY_ASKS = (
    "create a detailed summary",
    "summary of the conversation",
    "summarize the conversation",
    "context checkpoint compaction",
    "handoff summary",
    "prompt for continuing our conversation",
    "produce the <state_snapshot> xml",
)


def write_workspace(root: Path, files: int, tokens_each: int) -> list[Path]:
    """`files` text files of about `tokens_each` tokens, each headed `FILE NN of M`, with lines
    that differ from file to file (as source files do)."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(1, files + 1):
        lines = [f"FILE {i:02d} of {files}: notes for module m{i:02d}"]
        words = 0
        k = 0
        while words < tokens_each * 0.7:  # ~1.4 tokens per word in these lines
            line = f"def step_{i}_{k}(value, limit={k * 7 % 97}): return value * {k % 13} + limit  # check {i}-{k}"
            lines.append(line)
            words += len(line.split())
            k += 1
        path = root / f"f{i:02d}.txt"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def _texts(value: Any) -> list[str]:
    """Every string in a request body part (tool results, text blocks, Responses items)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return []


def _last_user_text(body: dict[str, Any], responses: bool) -> str:
    items = body.get("input") if responses else body.get("messages")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            return " ".join(_texts(item.get("content")))
    return ""


class Script:
    """What the scripted model has done, and what the agent sent it."""

    def __init__(self, windows: dict[str, int], files: list[Path]) -> None:
        self.windows = windows
        self.files = files
        self.lock = threading.Lock()
        self.read = 0  # the highest file number seen in a tool result
        self.requests: list[dict[str, Any]] = []

    def window(self, model: str) -> int:
        return self.windows.get(model.rsplit("/", 1)[-1], 1_000_000)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            reqs = list(self.requests)
        return {
            "upstream_requests": len(reqs),
            "agent_compactions": sum(r["kind"] == "summary" for r in reqs),
            "tool_calls": sum(r["kind"] == "tool" for r in reqs),
            "guard_cut_requests": sum(r["guard_cut"] for r in reqs),
            "refused_too_long": sum(r["refused"] for r in reqs),
            "max_input_tokens": max((r["input_tokens"] for r in reqs), default=0),
            "files_read": self.read,
        }


def _decide(script: Script, body: dict[str, Any], responses: bool) -> tuple[str, str]:
    """(kind, payload): 'summary' with its text, 'tool' with the path to read, 'final' or 'side' with a text."""
    asked = _last_user_text(body, responses).lower()
    if any(s in asked for s in SUMMARY_ASKS):
        said = (
            f"The user asked to read f01..f{len(script.files):02d} one at a time. Files read so "
            f"far: f01 to f{script.read:02d}; their contents were noted. Next: f{script.read + 1:02d}."
        )
        if "<state_snapshot>" in asked:  # (Qwen Code keeps the snapshot only)
            return "summary", f"<analysis>Files read.</analysis><state_snapshot>{said}</state_snapshot>"
        return "summary", f"<summary>{said}</summary>"
    tools = body.get("tools") or []
    names = _tool_names(body)
    if not names & {"Read", "read", "read_file", "shell", "exec_command", "shell_command", "local_shell"} and not any(
        t.get("type") == "local_shell" for t in tools if isinstance(t, dict)
    ):
        return "side", "Reading files"
    if script.read >= len(script.files):
        return "final", f"done: read all {len(script.files)} files"
    return "tool", str(script.files[script.read])


def _tool_names(body: dict[str, Any]) -> set[str]:
    tools = body.get("tools") or []
    return {t.get("name") or (t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)}


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            self._send(200, {"data": [{"id": m, "object": "model"} for m in script.windows]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            path = self.path.split("?")[0].rstrip("/")
            responses = path.endswith("/responses")
            chat = path.endswith("/chat/completions")
            if not responses and not chat and not path.endswith("/messages"):
                return self._send(404, {"error": {"message": f"no route {path}"}})
            model = str(body.get("model", ""))
            n = responses_input_tokens(body) if responses else input_tokens(body)
            out = body.get("max_output_tokens") if responses else body.get("max_tokens")
            window = script.window(model)
            with script.lock:
                for text in _texts(body.get("input") if responses else body.get("messages")):
                    for m in FILE_HEAD.finditer(text):
                        script.read = max(script.read, int(m.group(1)))
                kind, payload = _decide(script, body, responses)
                refused = n + (out or 0) > window
                script.requests.append(
                    {
                        "kind": kind,
                        "input_tokens": n,
                        "max_tokens": out,
                        "refused": refused,
                        "guard_cut": MARKER in _dump(body),
                        "at": time.time(),
                    }
                )
            if refused:
                if responses or chat:
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": "Your input exceeds the context window of this model.",
                                "type": "invalid_request_error",
                                "code": "context_length_exceeded",
                            }
                        },
                    )
                return self._send(
                    400,
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": f"prompt is too long: {n} tokens + {out} > {window} maximum",
                        },
                    },
                )
            if responses:
                return self._responses(body, kind, payload, n)
            if chat:
                return self._chat(body, kind, payload, n)
            return self._messages(body, kind, payload, n)

        def _chat(self, body: dict[str, Any], kind: str, payload: str, n: int) -> None:
            cid, created = "chatcmpl-" + uuid.uuid4().hex[:12], int(time.time())
            usage = {"prompt_tokens": n, "completion_tokens": 20, "total_tokens": n + 20}
            if kind == "tool":
                # Qwen Code's read tool, or OpenCode's
                name, args = (
                    ("read_file", {"file_path": payload})
                    if "read_file" in _tool_names(body)
                    else ("read", {"filePath": payload})
                )
                call = {
                    "id": "call_" + uuid.uuid4().hex[:12],
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
                stop = "tool_calls"
            else:
                message, stop = {"role": "assistant", "content": payload}, "stop"
            head = {"id": cid, "created": created, "model": body.get("model")}
            if not body.get("stream"):
                choice = {"index": 0, "message": message, "finish_reason": stop}
                return self._send(200, {**head, "object": "chat.completion", "choices": [choice], "usage": usage})
            delta = dict(message)
            if kind == "tool":
                delta["tool_calls"] = [{**message["tool_calls"][0], "index": 0}]
            chunks = [
                {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": stop}]},
                {"choices": [], "usage": usage},
            ]
            data = "".join(f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', **c})}\n\n" for c in chunks)
            return self._send(200, (data + "data: [DONE]\n\n").encode(), "text/event-stream")

        def _messages(self, body: dict[str, Any], kind: str, payload: str, n: int) -> None:
            msg_id = "msg_" + uuid.uuid4().hex[:12]
            usage = {
                "input_tokens": n,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 20,
            }
            if kind == "tool":
                block: dict[str, Any] = {
                    "type": "tool_use",
                    "id": "toolu_" + uuid.uuid4().hex[:16],
                    "name": "Read",
                    "input": {"file_path": payload},
                }
                stop = "tool_use"
            else:
                block, stop = {"type": "text", "text": payload}, "end_turn"
            if not body.get("stream"):
                return self._send(
                    200,
                    {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model"),
                        "content": [block],
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                )
            start = {**block, "input": {}} if kind == "tool" else {"type": "text", "text": ""}
            delta = (
                {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                if kind == "tool"
                else {"type": "text_delta", "text": payload}
            )
            events = [
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": msg_id,
                            "type": "message",
                            "role": "assistant",
                            "model": body.get("model"),
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": {**usage, "output_tokens": 1},
                        },
                    },
                ),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 20},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
            data = "".join(f"event: {name}\ndata: {json.dumps(p)}\n\n" for name, p in events).encode()
            return self._send(200, data, "text/event-stream")

        def _responses(self, body: dict[str, Any], kind: str, payload: str, n: int) -> None:
            rid = "resp_" + uuid.uuid4().hex[:12]
            if kind == "tool":
                item: dict[str, Any] = {
                    "id": "fc_" + uuid.uuid4().hex[:12],
                    "type": "function_call",
                    "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:12],
                    **_shell_call(body, payload),
                }
            else:
                item = {
                    "id": "msg_" + uuid.uuid4().hex[:12],
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": payload, "annotations": []}],
                }
            usage = {
                "input_tokens": n,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 20,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": n + 20,
            }

            def response(status: str) -> dict[str, Any]:
                done = status == "completed"
                return {
                    "id": rid,
                    "object": "response",
                    "created_at": int(time.time()),
                    "status": status,
                    "error": None,
                    "incomplete_details": None,
                    "model": body.get("model"),
                    "output": [item] if done else [],
                    "parallel_tool_calls": False,
                    "tool_choice": "auto",
                    "tools": [],
                    "usage": usage if done else None,
                    "store": False,
                    "text": {"format": {"type": "text"}},
                    "metadata": {},
                }

            if not body.get("stream"):
                return self._send(200, response("completed"))
            events = [
                {"type": "response.created", "response": response("in_progress")},
                {"type": "response.output_item.added", "output_index": 0, "item": item},
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                {"type": "response.completed", "response": response("completed")},
            ]
            data = "".join(
                f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': i})}\n\n" for i, e in enumerate(events)
            ).encode()
            return self._send(200, data, "text/event-stream")

    return Handler


def _shell_call(body: dict[str, Any], path: str) -> dict[str, Any]:
    """A Responses function call that reads `path` with whichever shell tool the agent offered."""
    names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if "exec_command" in names:
        return {"name": "exec_command", "arguments": json.dumps({"cmd": f"cat {path}"})}
    if "shell_command" in names:
        return {"name": "shell_command", "arguments": json.dumps({"command": f"cat {path}"})}
    return {"name": "shell", "arguments": json.dumps({"command": ["cat", path]})}


def serve(port: int, windows: dict[str, int], files: list[Path]) -> tuple[ThreadingHTTPServer, Script]:
    script = Script(windows, files)
    server = Server(("127.0.0.1", port), make_handler(script))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, script
