"""The assistant's words a long last user message answers (`Policy.keep_answered_share`): pinned
with it while the agent works after it, so that a new cut drops the agent's steps after that
message and the provider's cache holds through it (a pasted log re-sent uncached when a cut dropped
the message before it: bench.sweep's held-out Qwen Code and Cursor chats, session 62)."""

from __future__ import annotations

from collections.abc import Sequence

# the pinned messages, with the words a long last user message answers, leave the agent's steps
# after it at least a tenth of the room, or those words are not pinned: where they left 2% (a
# held-out Cursor chat at 50%: a pasted error of 12k tokens in a 23k room), the newest steps did
# not fit beside them on four turns, and each such turn's cut without them broke the cache again;
# where they left 14% (a held-out Qwen Code session at 40%: a pasted log of 51k tokens in a 64k
# room), the steps fitted on every turn
ANSWERED_HELD = 0.9


def answered(
    counts: Sequence[int], fixed: int, held: Sequence[bool], last_user: int, words: bool, limits: tuple[int, int]
) -> set[int]:
    """The message just before the last user message (`last_user`), where it is the assistant's
    `words` alone, that user message is at least `limits[0]` tokens with the agent's steps after
    it, and the fixed tokens, the messages `held` (pinned) and those words take at most
    `limits[1]`; else none."""
    least, most = limits
    if not words or not 0 < last_user < len(counts) - 1 or counts[last_user] < least:
        return set()
    pinned = fixed + sum(n for n, h in zip(counts, held) if h)
    return {last_user - 1} if pinned + counts[last_user - 1] <= most else set()
