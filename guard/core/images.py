"""Image token costs by provider formula, from the image's real size when the body carries it.

OpenAI (GPT-4o family, "tile" formula): detail=low costs 85; otherwise the image is scaled to fit
2048x2048, then its short side to 768, and costs 85 + 170 per 512-px tile. Anthropic: about
width*height/750 after scaling the long edge to at most 1568 px (the documented formula). When the
size cannot be read (a remote URL, an unreadable payload) the formula's maximum is used, so images
are never under-counted. Reading a size decodes at most the first 64 KiB of base64: no network.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from collections.abc import Mapping
from typing import Any

OPENAI_LOW = 85
OPENAI_MAX = 85 + 170 * 8  # 768x2048 after scaling: 2x4 tiles
ANTHROPIC_MAX = 1600  # Anthropic scales down any image above ~1,600 tokens
_PREFIX_CHARS = 65536


def _size_from_base64(data: str) -> tuple[int, int] | None:
    from PIL import Image  # Pillow reads only the header of a lazily opened image

    chunk = data[:_PREFIX_CHARS]
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        raw = base64.b64decode(chunk, validate=False)
        with Image.open(io.BytesIO(raw)) as img:
            w, h = img.size
    except (binascii.Error, OSError, ValueError, SyntaxError):
        return None
    if w <= 0 or h <= 0:
        return None
    return w, h


def _size_from_url(url: str) -> tuple[int, int] | None:
    if url.startswith("data:") and ";base64," in url[:100]:
        return _size_from_base64(url.split(",", 1)[1])
    return None


def openai_image_tokens(width: int | None, height: int | None, detail: str = "auto") -> int:
    if detail == "low":
        return OPENAI_LOW
    if not width or not height:
        return OPENAI_MAX
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return OPENAI_LOW + 170 * tiles


def anthropic_image_tokens(width: int | None, height: int | None) -> int:
    if not width or not height:
        return ANTHROPIC_MAX
    w, h = float(width), float(height)
    if max(w, h) > 1568:
        scale = 1568 / max(w, h)
        w, h = w * scale, h * scale
    return min(ANTHROPIC_MAX, max(1, math.ceil(w * h / 750)))


def image_part_tokens(part: Mapping[str, Any], formula: str) -> int:
    """Tokens of one image part: OpenAI chat `image_url`, Responses `input_image` (`image_url` a
    string, `detail` on the part; by `file_id`, the formula's largest) or Anthropic `image`."""
    size: tuple[int, int] | None = None
    detail = "auto"
    if part.get("type") == "input_image":
        url = part.get("image_url")
        if isinstance(part.get("detail"), str):
            detail = part["detail"]
        if isinstance(url, str):
            size = _size_from_url(url)
    elif part.get("type") == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, Mapping) else spec
        if isinstance(spec, Mapping) and isinstance(spec.get("detail"), str):
            detail = spec["detail"]
        if isinstance(url, str):
            size = _size_from_url(url)
    else:
        source = part.get("source")
        if isinstance(source, Mapping):
            if source.get("type") == "base64" and isinstance(source.get("data"), str):
                size = _size_from_base64(source["data"])
            elif isinstance(source.get("url"), str):
                size = _size_from_url(source["url"])
    w, h = size if size else (None, None)
    if formula == "openai":
        return openai_image_tokens(w, h, detail)
    return anthropic_image_tokens(w, h)
