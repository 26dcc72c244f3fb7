"""Other context managers that may cut the same request after the guard, so none cuts twice blind.

- `anthropic_context_management`: the request's `context_management` (Anthropic's server-side
  context editing, `clear_tool_uses_*` / `compact_*`; LiteLLM polyfills it for non-Anthropic
  backends on `/v1/messages`). It triggers on its own input threshold, after the guard.
- `openai_context_management`: a Responses API request's `context_management` (OpenAI's
  server-side compaction, `[{"type": "compaction", "compact_threshold": N}]`): the provider
  compacts the conversation itself once it passes its threshold.
- `openai_truncation_auto`: a Responses API request's `truncation: "auto"`: the provider drops
  items from the start of the conversation when the input (its stored state included) overflows,
  instead of refusing. The guard fits what the body carries first; "auto" only acts on what the
  guard cannot see (`previous_response_id`, `conversation`).
- `litellm_compression`: LiteLLM's `compression_interception` callback (`compress()`), which stubs
  messages of `/v1/messages` requests above its `compression_trigger` in the deployment hook.

How they combine (docs/design.md, "Other context managers"): the guard fits first and only as far
as the window needs; it never relies on a later cut. A later manager whose trigger is below the
guard's room cuts again — set its trigger above the room (the guard's report gives it) or leave
the cutting to one of them. The guard reports what it found, by name, and changes nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def detect(body: Mapping[str, Any], callbacks: Iterable[Any] = ()) -> list[str]:
    found = []
    cm = body.get("context_management")
    if isinstance(cm, Mapping) and cm.get("edits"):
        found.append("anthropic_context_management")
    elif isinstance(cm, list) and cm and "input" in body:
        found.append("openai_context_management")
    if body.get("truncation") == "auto" and "input" in body:
        found.append("openai_truncation_auto")
    for cb in callbacks:
        name = cb if isinstance(cb, str) else type(cb).__name__
        if "compression" in str(name).lower() and "litellm_compression" not in found:
            found.append("litellm_compression")
    return found
