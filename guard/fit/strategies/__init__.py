"""The functions of the steps that rewrite the conversation (their names, order and kinds are in
guard.core.steps). Each has one shape: (Conversation, Context) -> Outcome.

A strategy works through its candidates oldest first and stops as soon as the conversation is at
the context's stop mark. It reads the context and never writes to it: its `Outcome` carries the
new conversation, a ledger of its own (one entry with the tokens it saved, the steps it found
exhausted) and the marks it leaves, which the planner appends and takes (`Context.take`).
`clamp_output` and `summarize` change the budget or need I/O, so the planner runs them itself.
"""

from __future__ import annotations

from collections.abc import Callable

from guard.core.steps import of_kind
from guard.fit.conversation import Context, Conversation, Outcome
from guard.fit.strategies.arguments import truncate_recent_call_arguments
from guard.fit.strategies.compact import compact_json, drop_metadata
from guard.fit.strategies.dedupe import dedupe
from guard.fit.strategies.drop import drop_oldest_turns
from guard.fit.strategies.truncate import truncate_recent_tool_results, truncate_tool_results

Strategy = Callable[[Conversation, Context], Outcome]

STRATEGIES: dict[str, Strategy] = {
    "compact_json": compact_json,
    "drop_metadata": drop_metadata,
    "dedupe": dedupe,
    "truncate_tool_results": truncate_tool_results,
    "drop_oldest_turns": drop_oldest_turns,
    "truncate_recent_tool_results": truncate_recent_tool_results,
    "truncate_recent_call_arguments": truncate_recent_call_arguments,
}

# every step that rewrites the conversation has its function (the registry: guard.core.steps)
assert set(STRATEGIES) == of_kind("rewrite", "lossy", "newest"), "guard.core.steps and STRATEGIES disagree"

__all__ = ["STRATEGIES", "Strategy"]
