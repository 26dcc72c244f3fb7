"""Lossless and near-lossless JSON savings: compact serialization, then bulky metadata keys."""

from __future__ import annotations

from itertools import chain

from guard import jsontext
from guard.conversation import Context, Conversation, ToolResult, rewrite_tool_results
from guard.dialects import Content, map_texts


def compact_json(conv: Conversation, ctx: Context) -> Conversation:
    """Re-serialize JSON tool results without whitespace: older results first, then recent ones
    (same data, fewer tokens; the only rewrite allowed inside the newest turns)."""
    older = conv.tool_slots(recent=False)
    newest = [s for s in conv.tool_slots(recent=True) if conv.recent[s[0]]]

    def transform(result: ToolResult) -> Content:
        return map_texts(result.content, jsontext.compact)

    return rewrite_tool_results(conv, ctx, "compact_json", chain(older, newest), transform, lossless=True)


def drop_metadata(conv: Conversation, ctx: Context) -> Conversation:
    """Remove the policy's bulky keys (embeddings, raw html, metadata dicts) from older JSON tool
    results, keeping citation keys (id, title, url, ...) of bulky dicts."""
    bulky, citation = ctx.policy.metadata_keys, ctx.policy.citation_keys

    def transform(result: ToolResult) -> Content:
        return map_texts(result.content, lambda text: jsontext.drop_keys(text, bulky, citation))

    return rewrite_tool_results(conv, ctx, "drop_metadata", conv.tool_slots(recent=False), transform, lossless=True)
