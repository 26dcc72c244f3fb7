"""Sessions of pi's coding agent with the provider's count of every request they made. A pi
session file (`~/.pi/agent/sessions/.../<session>.jsonl`) logs each assistant message with the
`usage` of the request that produced it: `input + cacheRead + cacheWrite` is what Anthropic billed
as its input. Each request is rebuilt as pi sent it (`convert.py pi` on the session's lines before
that assistant message: pi's own system prompt and tool schemas of the time, so nothing is added
to any count) and kept where its messages begin the session's loop in bench/corpus/agents (a
request whose history pi rendered otherwise, or one of another model, is left out and counted).

    python bench/corpus/usage/pi.py SESSION.jsonl --loop pi__large-session \
        --source "owner/repo COMMIT path" [--out DIR]

Writes `pi_<loop's id>.json.gz`: the loop's name and per request `[messages before it, input
tokens billed]`, with `tools_rebuilt` (bench.usage then compares each count as it is).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import claude_code  # noqa: E402  (beside this file: the command line both share)
from convert import pi  # noqa: E402  (bench/corpus/agents/convert.py)


def session(lines: list[dict[str, Any]], loop: dict[str, Any]) -> tuple[list[list[int]], int]:
    """`[messages before it, input tokens billed]` of every request of the loop's model whose rebuilt
    messages begin the loop's, and how many billed requests were left out."""
    out: list[list[int]] = []
    skipped = 0
    for k, line in enumerate(lines):
        message = line.get("message") or {}
        if line.get("type") != "message" or message.get("role") != "assistant":
            continue
        usage = message.get("usage") or {}
        billed = sum(int(usage.get(key) or 0) for key in ("input", "cacheRead", "cacheWrite"))
        if not billed:
            continue  # (an aborted or failed request: nothing billed)
        sent = pi(lines[:k])["messages"]
        if message.get("model") != loop["model"] or not sent or loop["messages"][: len(sent)] != sent:
            skipped += 1
            continue
        out.append([len(sent), billed])
    return out, skipped


def bills(lines: list[dict[str, Any]], loop: dict[str, Any]) -> dict[str, Any]:
    """What a pi session's file holds: the bills of the loop's requests, counts compared as they are."""
    usage, skipped = session(lines, loop)
    print(skipped, "billed requests left out")
    return {"tools_rebuilt": True, "usage": usage}


def main() -> None:
    claude_code.main(bills, "pi", __doc__)


if __name__ == "__main__":
    main()
