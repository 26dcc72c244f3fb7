"""Structure-aware truncation of tool results: JSON stays valid JSON, text keeps head and tail."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from guard.core import jsontext
from guard.core.content import other_parts
from guard.core.policy import Policy
from guard.dialects import Content, content_texts, replace_text
from guard.fit.conversation import Context, Conversation, Outcome
from guard.fit.history import Slot
from guard.fit.rewrite import Rewrite, ToolResult, rewrite_tool_results


def rung(tokens: int, floor: int) -> int:
    """The size a truncated result keeps: the largest step of the ladder floor, 2 floor, 4 floor,
    ... at or below `tokens` (never below the floor). Sizes from a fixed ladder, not lengths
    fitted to the exact total, keep a result's cut the same while the conversation grows."""
    if tokens <= floor:
        return floor
    return floor << ((tokens // floor).bit_length() - 1)


def _text_only(content: Content, text: str) -> Content:
    """`content` as `text` alone (`replace_text`), ending with a line that says which other parts
    went with the cut (by type and number: no content of theirs), so a result whose screenshots
    were cut away does not read as if the tool had sent none."""
    gone = Counter(_kind(p) for p in other_parts(content))
    if gone:
        parts = ", ".join(f"{n} {kind} part{'s' if n > 1 else ''}" for kind, n in sorted(gone.items()))
        text = f"{text}\n[context-guard: {parts} removed]" if text else f"[context-guard: {parts} removed]"
    return replace_text(content, text)


def _kind(part: object) -> str:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 32 else "other"


def _bounds(
    conv: Conversation, ctx: Context, result: ToolResult, text: str, *, exact: bool, only_text: bool
) -> tuple[int, int]:
    """(an upper bound of the result's text in raw tokens, the tokens its text must lose)."""
    msg = conv.messages[result.index]
    blocks = msg.get("content")
    if exact or (result.slot is not None and isinstance(blocks, list) and len(blocks) > 1):
        # the last resort must land exactly (a short cut there is a refusal), and other blocks
        # sharing the message (more results, the client's text) would make its count overstate
        # this result: count the text itself
        if only_text:
            return ctx.counter.raw(text), result.over
        # the cut result keeps its text only: what its other parts (images, documents) cost goes
        # with them, and the text loses just the rest (else it lost the whole overflow: to the
        # floor, though the images alone saved enough)
        bare = ctx.counter.message(
            conv.dialect, conv.dialect.with_tool_result(msg, result.slot, _text_only(result.content, text))
        )
        return ctx.counter.raw(text), max(0, result.over - (result.message_tokens - bare))
    # the message's count bounds the text's tokens from above: no need to encode it again. Lossy
    # steps run on exact counts (the planner settles estimates first), so this bound, and the cut
    # made from it, is the same on every turn that sends this message
    return math.ceil(result.message_tokens / ctx.counter.factor), result.over


def _truncate(
    conv: Conversation, ctx: Context, kind: str, slots: Iterable[Slot], *, exact: bool = False
) -> Conversation:
    floor = ctx.policy.truncated_tool_result_tokens
    factor = ctx.counter.factor

    def transform(result: ToolResult) -> Content:
        content = result.content
        texts = content_texts(content)
        if not texts:
            # a result of media only (a computer-use agent's screenshots) keeps a line saying
            # what went: the steps around it stay, where dropping turns lost them too
            return _text_only(content, "") if _all_media(content) else content
        text = texts[0] if len(texts) == 1 else "\n".join(texts)
        msg = conv.messages[result.index]
        only_text = isinstance(content, str) or len(texts) == len(content)
        upper, over = _bounds(conv, ctx, result, text, exact=exact, only_text=only_text)
        keep = upper - math.ceil(over / factor)
        laddered = rung(keep, floor)
        cut: str | None = None
        lands = exact  # (cut to what is needed: checked on the count, and cut further if short)
        if exact:
            keep = max(floor, keep)  # the last resort must land
        elif ctx.ceiling is not None and ctx.stop_at - (keep - jsontext.CLOSE * laddered) * factor < ctx.least:
            # a carried cut's prefix (made once, to an explicit mark, then carried byte for byte:
            # guard.fit.carried) keeps what its mark needs where the ladder's step takes it under
            # the room bar (a result of half the room cut to the next rung down left 0.56 of the
            # room; a text whose structure steps coarsely lands at `jsontext.CLOSE` of the rung)
            cut = jsontext.shrink(text, laddered, ctx.counter.raw, upper)
            if ctx.stop_at - (keep - ctx.counter.raw(cut)) * factor < ctx.least:
                # (where the drop was decided first, as a cut made again is: it lands on the mark,
                # so a cut whose drop-first form ends a token or two over it is not the one that stands)
                keep, cut, lands = max(floor, keep), None, ctx.history.forced
            else:
                keep = laddered
        else:
            keep = laddered
        if upper <= keep and only_text:
            return content
        new = _text_only(content, cut if cut is not None else jsontext.shrink(text, keep, ctx.counter.raw, upper))
        if lands:
            # the last resort must land, and so must a drop-first cut to what its mark needs: the
            # scaled count of the whole message can round a token or two past what the text's own
            # count promised, so cut that much more (at most twice)
            wanted = result.message_tokens - result.over
            for _ in range(2):
                over = ctx.counter.message(conv.dialect, conv.dialect.with_tool_result(msg, result.slot, new)) - wanted
                if over <= 0 or keep <= floor:
                    break
                keep = max(floor, keep - math.ceil(over / factor))
                new = _text_only(content, jsontext.shrink(text, keep, ctx.counter.raw, upper))
        return new

    return rewrite_tool_results(conv, ctx, Rewrite(kind, transform), slots)


def truncate_tool_results(conv: Conversation, ctx: Context) -> Outcome:
    """Shrink older tool results, oldest first (those the last user message is about last), each
    down to what is still needed (at least the policy's `truncated_tool_result_tokens`); the
    newest turns stay intact."""
    ctx = ctx.own()
    slots = ctx.relevant_last(conv.tool_slots(recent=False), lambda s: (conv.origin[s[0]],))
    cut = ctx.settled_first(conv, slots, lambda c, some: _truncate(conv, c, "truncate_tool_results", some))
    return ctx.outcome(cut)


def truncate_recent_tool_results(conv: Conversation, ctx: Context) -> Outcome:
    """Last resort before rejecting: shrink tool results inside the newest turns too (never the
    system prompt or the last user message)."""
    ctx = ctx.own()
    slots = [s for s in conv.tool_slots(recent=True) if conv.recent[s[0]]]
    return ctx.outcome(_truncate(conv, ctx, "truncate_recent_tool_results", slots, exact=True))


def falls_short(conv: Conversation, stop_at: int, policy: Policy, factor: float) -> bool:
    """Whether truncating every older tool result would still leave `conv` over `stop_at`,
    estimated without cutting any: once the mark is out of its reach, truncation cuts every result
    to the policy's `truncated_tool_result_tokens`, and a cut lands at or above `jsontext.CLOSE`
    of its budget unless the result's structure steps more coarsely (whole items of a short
    list), so each result is taken to keep that share; a result with images or other non-text
    parts keeps at most its text and the line that says what went (`_kept`). Over bench.cache's
    4,628 truncations, none that reached its mark was estimated to fall short. True where the
    policy does not truncate."""
    if not policy.allows("truncate_tool_results"):
        return True
    keep = jsontext.CLOSE * policy.truncated_tool_result_tokens * factor
    kept: dict[int, float] = {}
    for i, _, content in conv.tool_slots(recent=False):
        kept[i] = kept.get(i, 0.0) + _kept(content, keep, factor)
    saved = sum(max(0.0, conv.counts[i] - k) for i, k in kept.items())
    return conv.total - saved > stop_at


# the line a result whose other parts went ends with (`_text_only`), in tokens, at most
_GONE_LINE_TOKENS = 16


def _kept(content: Content, keep: float, factor: float) -> float:
    """What a truncated result keeps, at most: `keep`; of a result with non-text parts (a
    screenshot beside a line of text), no more than its text, a token a character at worst, and
    the line that says what went (taken at `keep`, a loop of screenshots each with a word of text
    was judged out of truncation's reach and had its oldest steps dropped instead)."""
    texts = content_texts(content)
    if not isinstance(content, list) or len(texts) == len(content):
        return keep
    if not texts and not _all_media(content):
        return keep  # (left alone: see `_all_media`)
    return min(keep, (sum(map(len, texts)) + _GONE_LINE_TOKENS) * factor)


# parts that are media: an image, a document or file, an audio clip (a result of these alone is
# truncated to a line saying what went; one of other parts with no text, search results say, is
# left alone: its text is inside them, and truncation would lose all of it rather than cut it)
_MEDIA = frozenset({"image", "image_url", "input_image", "document", "file", "input_file", "input_audio"})


def _all_media(content: Content) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(p, Mapping) and p.get("type") in _MEDIA for p in content)
    )
