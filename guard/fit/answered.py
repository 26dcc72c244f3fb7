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
    counts: Sequence[int],
    fixed: int,
    system: Sequence[bool],
    kept: set[int],
    last_user: int,
    limits: tuple[int, int],
) -> tuple[set[int], bool]:
    """The message just before the last user message (`last_user`; the caller has found that
    message to be the assistant's words alone) to pin, where the agent has gone on after the user
    message, which is at least `limits[0]` tokens, and the fixed tokens, the `system` messages,
    those `kept` and those words take at most `limits[1]`; else none. And whether those words are
    *outgrown*: the user message is the newest message, at least `limits[0]` tokens, and with them
    the pinned messages take over `limits[1]`; then they are not kept as its turn either (the first
    cut drops them, where the next one would have, breaking the provider's cache before it)."""
    least, most = limits
    if counts[last_user] < least:  # (most requests stop here)
        return set(), False
    pinned = fixed + sum(n for i, (n, s) in enumerate(zip(counts, system)) if s or i in kept)
    fits = pinned + counts[last_user - 1] <= most
    if last_user == len(counts) - 1:  # (the newest message: no steps after it yet)
        return set(), not fits
    return ({last_user - 1} if fits else set()), False
