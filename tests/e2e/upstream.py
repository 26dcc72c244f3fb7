"""A strict provider on 127.0.0.1: OpenAI /v1/chat/completions and /v1/responses, Anthropic /v1/messages.

It counts every request's input with a real tokenizer (tiktoken o200k_base), independently of the
guard's code, and answers the provider's own 400 when input + max_tokens exceeds the model's
window, exactly as a real provider would. It records every body it receives.

    python -m tests.e2e.upstream --port 8099 --windows strict-8k=8192,strict-32k=32768

GET /_requests returns the recorded bodies; DELETE /_requests clears them. GET /_stats returns
counts (requests, context refusals and summary calls per model) even with `--no-record`; POST
/_control sets `fail_summaries` (answer the guard's summary calls with a 500) and `summary_delay`
(seconds to wait before answering them: a summarizer timeout).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken

from guard.core.encodings import get_encoding

ENC: tiktoken.Encoding = get_encoding("o200k_base")


def _n(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content(value: Any) -> int:
    if isinstance(value, str):
        return _n(value)
    total = 0
    if isinstance(value, list):
        for part in value:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text"):
                total += _n(part.get("text", ""))
            elif kind == "tool_use":
                total += _n(part.get("name", "")) + _n(_dump(part.get("input", {})))
            elif kind == "tool_result":
                total += _content(part.get("content", ""))
            elif kind in ("image", "image_url", "input_image"):
                total += 85
            else:
                total += _n(_dump(part))
    return total


def responses_input_tokens(body: dict[str, Any]) -> int:
    """A Responses API body's input tokens: instructions, every item's text (a reasoning item
    its summary: its encrypted content stands for reasoning the provider counts as that), tool
    schemas and the output format, 3 tokens of framing per item and 3 to prime the reply."""
    total = 3
    if body.get("instructions"):
        total += 3 + _content(body["instructions"])
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items or []:
        kind = item.get("type", "message")
        total += 3
        if kind == "message":
            total += _n(item.get("role", "")) + _content(item.get("content"))
        elif kind in ("function_call", "custom_tool_call"):  # (OpenAI bills the call's id: bench.usage)
            total += _n(item.get("name", "")) + _n(item.get("arguments", item.get("input", "")))
            total += _n(item.get("call_id", ""))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            total += _content(item.get("output"))
        elif kind == "reasoning":
            total += sum(_n(p.get("text", "")) for p in item.get("summary") or [])
        elif kind == "computer_call_output":  # a screenshot: an image's tokens, not its base64's
            total += _n(item.get("call_id", "")) + 85
        else:
            total += _n(_dump(item))
    for tool in body.get("tools") or []:
        total += _n(_dump(tool))
    if isinstance(body.get("text"), dict):
        total += _n(_dump(body["text"]))
    return total


def responses_invalid(body: dict[str, Any]) -> str | None:
    """OpenAI's rules for a Responses `input`: every output answers a call sent before it (unless
    the history lives at the provider), every call has its output, a reasoning item comes with the
    item that follows it."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    stored = bool(body.get("previous_response_id") or body.get("conversation"))
    calls: list[str] = []
    outputs: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind.endswith("_call") and "call_id" in item:
            calls.append(item["call_id"])
        elif kind.endswith("_call_output"):
            if item.get("call_id") not in calls and not stored:
                return f"No tool call found for function call output with call_id {item.get('call_id')}."
            outputs.add(item.get("call_id"))
        elif kind == "reasoning" and i + 1 == len(items):
            return f"Item '{item.get('id')}' of type 'reasoning' was provided without its required following item."
    missing = [c for c in calls if c not in outputs]
    return f"No tool output found for function call {missing[0]}." if missing else None


def input_tokens(body: dict[str, Any]) -> int:
    """Input tokens as this provider bills them: text of every message, tool call and tool
    result, tool schemas, 3 tokens of framing per message and 3 to prime the reply."""
    if "input" in body and "messages" not in body:
        return responses_input_tokens(body)
    total = 3
    system = body.get("system")
    if system:
        total += _content(system) + 3
    for m in body.get("messages", []):
        total += 3 + _n(m.get("role", "")) + _content(m.get("content"))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            total += _n(fn.get("name", "")) + _n(fn.get("arguments", ""))
        if m.get("tool_call_id"):
            total += _n(m["tool_call_id"])
    for tool in body.get("tools") or []:
        total += _n(_dump(tool))
    return total


def is_summary_call(body: dict[str, Any]) -> bool:
    """A call made by the guard's summarizer (its system prompt), not by a client."""
    msgs = body.get("messages") or []
    first = msgs[0] if msgs and isinstance(msgs[0], dict) else {}
    text = first.get("content") if first.get("role") == "system" else None
    return isinstance(text, str) and text.startswith(("You compact the earlier part", "You merge partial summaries"))


def cached_tokens(n: int) -> int:
    return max(0, (n // 1024 - 1) * 1024)


def invalid_thinking(body: dict[str, Any]) -> str | None:
    """Anthropic refuses a thinking budget below 1024 or not below max_tokens."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget, out = thinking.get("budget_tokens"), body.get("max_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if not isinstance(out, int) or budget >= out:
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    return None


class Upstream:
    def __init__(
        self, windows: dict[str, int], delay: float = 0.0, record: bool = True, scales: dict[str, float] | None = None
    ) -> None:
        self.windows = windows
        # per model: this provider's tokenizer counts `scale` times the reference count (a model
        # whose real tokenizer the guard does not have: what calibration must learn)
        self.scales = scales or {}
        self.delay = delay
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.fail_summaries = False  # answer the guard's summary calls with a 500
        self.summary_delay = 0.0  # wait this long before answering a summary call
        self.stats: dict[str, Any] = {"requests": 0, "refused_too_long": {}, "summary_calls": 0}

    def window(self, model: str) -> int:
        return self.windows.get(model.rsplit("/", 1)[-1], 1_000_000)

    def count(self, model: str, body: dict[str, Any]) -> int:
        n = input_tokens(body)
        scale = self.scales.get(model.rsplit("/", 1)[-1])
        return n if scale is None else int(n * scale + 0.999)


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler that answers JSON (or bytes, such as server-sent events)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default listen backlog (5) resets connections under load


def make_handler(state: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/_stats"):
                with state.lock:
                    self._send(200, state.stats)
            elif self.path.startswith("/_requests"):
                with state.lock:
                    self._send(200, state.requests)
            else:
                self._send(200, {"data": [{"id": m, "object": "model"} for m in state.windows]})

        def do_DELETE(self) -> None:
            with state.lock:
                state.requests.clear()
            self._send(200, {"ok": True})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.startswith("/_control"):
                with state.lock:
                    state.fail_summaries = bool(body.get("fail_summaries", state.fail_summaries))
                    state.summary_delay = float(body.get("summary_delay", state.summary_delay))
                return self._send(200, {"fail_summaries": state.fail_summaries, "summary_delay": state.summary_delay})
            anthropic = self.path.rstrip("/").endswith("/messages")
            responses = self.path.rstrip("/").endswith("/responses")
            model = str(body.get("model", ""))
            n = state.count(model, body)
            out = (
                body.get("max_output_tokens")
                if responses
                else body.get("max_completion_tokens") or body.get("max_tokens")
            )
            window = state.window(model)
            summary_call = is_summary_call(body)
            with state.lock:
                if state.record:
                    state.requests.append({"path": self.path, "body": body, "input_tokens": n, "window": window})
                state.stats["requests"] += 1
                state.stats["summary_calls"] += summary_call
                if n + (out or 0) > window:
                    refused = state.stats["refused_too_long"]
                    refused[model] = refused.get(model, 0) + 1
            if state.delay:
                time.sleep(state.delay)
            if summary_call and state.summary_delay:
                time.sleep(state.summary_delay)
            if state.fail_summaries and summary_call:
                return self._send(500, {"error": {"message": "summarizer down", "type": "server_error"}})
            thinking_error = invalid_thinking(body)
            if thinking_error:  # Anthropic's rule for extended thinking
                with state.lock:
                    state.stats["refused_thinking"] = state.stats.get("refused_thinking", 0) + 1
                return self._send(
                    400, {"type": "error", "error": {"type": "invalid_request_error", "message": thinking_error}}
                )
            invalid = responses_invalid(body) if responses else None
            if invalid:
                with state.lock:
                    state.stats["refused_invalid"] = state.stats.get("refused_invalid", 0) + 1
                return self._send(
                    400,
                    {"error": {"message": invalid, "type": "invalid_request_error", "param": "input", "code": None}},
                )
            if n + (out or 0) > window:
                if responses:
                    msg = "Your input exceeds the context window of this model. Please adjust your input and try again."
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": msg,
                                "type": "invalid_request_error",
                                "param": "input",
                                "code": "context_length_exceeded",
                            }
                        },
                    )
                if anthropic:
                    msg = f"prompt is too long: {n} tokens + {out} > {window} maximum"
                    return self._send(
                        400, {"type": "error", "error": {"type": "invalid_request_error", "message": msg}}
                    )
                msg = f"This model's maximum context length is {window} tokens. However, you requested {n + (out or 0)} tokens ({n} in the messages, {out} in the completion)."
                return self._send(
                    400,
                    {
                        "error": {
                            "message": msg,
                            "type": "invalid_request_error",
                            "param": "messages",
                            "code": "context_length_exceeded",
                        }
                    },
                )
            text = f"ok: {n} input tokens"
            if is_summary_call(body):
                digest = hashlib.sha256(_dump(body.get("messages")).encode()).hexdigest()[:12]
                text = f"summary of {n} input tokens (digest {digest}): task, files and errors kept"
            if responses:
                return self._responses(body, text, n)
            if anthropic and body.get("stream"):
                msg_id = "msg_" + uuid.uuid4().hex[:12]
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
                                "usage": {"input_tokens": n, "output_tokens": 1},
                            },
                        },
                    ),
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                    ),
                    (
                        "content_block_delta",
                        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                    ),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                            "usage": {"output_tokens": 5},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
                return self._send(200, data, "text/event-stream")
            if anthropic:
                return self._send(
                    200,
                    {
                        "id": "msg_" + uuid.uuid4().hex[:12],
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model"),
                        "content": [{"type": "text", "text": text}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        # Anthropic reports cache reads apart from input_tokens
                        "usage": {
                            "input_tokens": n - cached_tokens(n),
                            "cache_read_input_tokens": cached_tokens(n),
                            "cache_creation_input_tokens": 0,
                            "output_tokens": 5,
                        },
                    },
                )
            if body.get("stream"):
                chunk = {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}],
                }
                end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                data = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()
                return self._send(200, data, "text/event-stream")
            return self._send(
                200,
                {
                    "id": "chatcmpl-" + uuid.uuid4().hex[:12],
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    # a provider's prompt-cache report: every whole 1,024-token block but the last is "cached"
                    "usage": {
                        "prompt_tokens": n,
                        "completion_tokens": 5,
                        "total_tokens": n + 5,
                        "prompt_tokens_details": {"cached_tokens": cached_tokens(n)},
                    },
                },
            )

        def _responses(self, body: dict[str, Any], text: str, n: int) -> None:
            """A Responses API answer: one output_text message; as server-sent events if streamed."""
            rid, mid = "resp_" + uuid.uuid4().hex[:12], "msg_" + uuid.uuid4().hex[:12]
            part = {"type": "output_text", "text": text, "annotations": []}
            message = {"id": mid, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
            usage = {
                "input_tokens": n,
                "input_tokens_details": {"cached_tokens": cached_tokens(n)},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": n + 5,
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
                    "instructions": body.get("instructions"),
                    "max_output_tokens": body.get("max_output_tokens"),
                    "model": body.get("model"),
                    "output": [message] if done else [],
                    "parallel_tool_calls": True,
                    "previous_response_id": body.get("previous_response_id"),
                    "reasoning": {"effort": None, "summary": None},
                    "store": False,
                    "temperature": 1.0,
                    "text": {"format": {"type": "text"}},
                    "tool_choice": "auto",
                    "tools": [],
                    "top_p": 1.0,
                    "truncation": "disabled",
                    "usage": usage if done else None,
                    "user": None,
                    "metadata": {},
                }

            if not body.get("stream"):
                return self._send(200, response("completed"))
            where = {"item_id": mid, "output_index": 0, "content_index": 0}
            events = [
                {"type": "response.created", "response": response("in_progress")},
                {"type": "response.in_progress", "response": response("in_progress")},
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**message, "status": "in_progress", "content": []},
                },
                {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
                {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []},
                {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
                {"type": "response.content_part.done", **where, "part": part},
                {"type": "response.output_item.done", "output_index": 0, "item": message},
                {"type": "response.completed", "response": response("completed")},
            ]
            data = "".join(
                f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': i})}\n\n" for i, e in enumerate(events)
            ).encode()
            return self._send(200, data, "text/event-stream")

    return Handler


def serve(
    port: int, windows: dict[str, int], delay: float = 0.0, record: bool = True, scales: dict[str, float] | None = None
) -> tuple[ThreadingHTTPServer, Upstream]:
    state = Upstream(windows, delay, record, scales)
    server = Server(("127.0.0.1", port), make_handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--windows", default="strict-8k=8192")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--no-record", action="store_true", help="keep counts only (long load runs)")
    args = parser.parse_args()
    windows = {k: int(v) for k, v in (item.split("=") for item in args.windows.split(","))}
    server, _ = serve(args.port, windows, args.delay, record=not args.no_record)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
