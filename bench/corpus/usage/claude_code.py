"""Claude Code sessions with the provider's count of every request they made. A Claude Code
transcript (`~/.claude/projects/.../<session>.jsonl`) logs each assistant message, one line a
content block, with the `usage` of the request that produced it: `input_tokens +
cache_creation_input_tokens + cache_read_input_tokens` is what Anthropic billed as its input. The
session's requests are its loop in bench/corpus/agents (`convert.py claudecode`: one message per
response, the k-th assistant message the k-th response), so the k-th request is that loop's
messages before its k-th assistant message. The transcript holds neither the system prompt nor the
tool schemas (the loop's stand-ins differ): the provider's count minus the guard's on the first
request is added to every count of the session (`bench.usage`). Requests after Claude Code
compacted its own history (a `compact_boundary` line) are left out: they start from its summary.

    python bench/corpus/usage/claude_code.py TRANSCRIPT.jsonl --loop claudecode__196820da \
        --source "owner/repo COMMIT path" [--out DIR]

Writes `claudecode_<loop's id>.json.gz`: the loop's name and per request `[messages before it,
input tokens billed]`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from convert import write_gz  # noqa: E402  (bench/corpus/agents/convert.py)

AGENTS = Path(__file__).resolve().parents[1] / "agents"


def billed_requests(lines: list[dict[str, Any]]) -> list[int]:
    """The input tokens billed for each response, in order, up to the session's own compaction."""
    billed: dict[str, int] = {}
    for line in lines:
        if line.get("type") == "system" and line.get("subtype") == "compact_boundary":
            break
        if line.get("type") != "assistant":
            continue
        message = line["message"]
        usage = message.get("usage") or {}
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        billed.setdefault(message["id"], sum(int(usage.get(k) or 0) for k in keys))
    return list(billed.values())


def session(lines: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[list[int]]:
    """`[messages before it, input tokens billed]` of every request the loop's messages rebuild."""
    replies = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    return [[end, billed] for end, billed in zip(replies, billed_requests(lines))]


def bills(lines: list[dict[str, Any]], loop: dict[str, Any]) -> dict[str, Any]:
    """What a Claude Code session's file holds: the bills of the loop's requests."""
    return {"usage": session(lines, loop["messages"])}


def main(
    rebuild: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] = bills,
    prefix: str = "claudecode",
    doc: str | None = None,
) -> None:
    """The command line of a session converter: read the session file (JSONL) and its loop in
    bench/corpus/agents, write `<prefix>_<loop's id>.json.gz` with its source, the loop's name and
    what `rebuild` makes of them (the bills, per request)."""
    parser = argparse.ArgumentParser(description=(doc or __doc__ or "").splitlines()[0])
    parser.add_argument("session", type=Path, help="the agent's session file (JSONL)")
    parser.add_argument(
        "--loop", required=True, help="the session's loop in bench/corpus/agents (its file name's stem)"
    )
    parser.add_argument("--source", required=True, help="where the session came from (repository, commit, path)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    lines = [json.loads(line) for line in args.session.read_text().splitlines() if line.strip()]
    with gzip.open(AGENTS / f"{args.loop}.json.gz", "rt", encoding="utf-8") as f:
        loop = json.load(f)
    data = {"x_source": args.source, "loop": args.loop, **rebuild(lines, loop)}
    target = args.out / f"{prefix}_{args.loop.split('__')[-1]}.json.gz"
    write_gz(target, data)
    print(target, len(data["usage"]), "requests")


if __name__ == "__main__":
    main()
