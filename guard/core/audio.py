"""Audio input token costs, from the clip's length when the body carries it.

A chat `input_audio` part (`{"data": base64, "format": "wav" | "mp3" | ...}`) is billed by its
duration, not by its base64: counted as text, a 30-second clip was ~870k tokens, more than most
windows. The guard counts `AUDIO_TOKENS_PER_SECOND` a second, an upper bound (Gemini documents 32
tokens a second of audio; Whisper-style encoders, the densest in use, emit 50 frames a second). A WAV
clip's duration is read from its header; any other format is taken at `LOWEST_BITRATE`, the lowest
bitrate speech is sent at, so its duration, and its count, are never under-stated. Reading decodes
the first bytes of the base64 only: no audio library, no network.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping
from typing import Any

AUDIO_TOKENS_PER_SECOND = 50
LOWEST_BITRATE = 16_000  # bits a second (speech codecs at their thinnest: Opus, AMR-WB, mp3 at 16 kbps)
_WAV_HEADER = 44


def _payload_bytes(data: str) -> int:
    """The decoded size of a base64 string, from its length."""
    return len(data) * 3 // 4 - data[-2:].count("=")


def audio_seconds(data: str, fmt: Any) -> float:
    """The clip's duration: exact from a WAV header, else an upper bound from its size."""
    size = _payload_bytes(data)
    if fmt == "wav" or data.startswith("UklGR"):  # ("RIFF" in base64)
        try:
            head = base64.b64decode(data[: _WAV_HEADER * 2], validate=False)[:_WAV_HEADER]
        except (binascii.Error, ValueError):
            head = b""
        if len(head) >= 32 and head[:4] == b"RIFF" and head[8:12] == b"WAVE":
            byte_rate = int(struct.unpack_from("<I", head, 28)[0])
            if byte_rate > 0:
                return max(0, size - _WAV_HEADER) / byte_rate
    return size * 8 / LOWEST_BITRATE


def audio_part_tokens(part: Mapping[str, Any]) -> int | None:
    """Tokens of a chat `input_audio` part, or None where it carries no base64 data (then counted
    as its JSON)."""
    spec = part.get("input_audio")
    if not isinstance(spec, Mapping):
        return None
    data = spec.get("data")
    if not isinstance(data, str) or not data:
        return None
    return max(1, math.ceil(audio_seconds(data, spec.get("format")) * AUDIO_TOKENS_PER_SECOND))
