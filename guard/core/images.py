"""Image token costs by provider formula, from the image's real size when the body carries it.

- OpenAI, tiles (GPT-4o, 4.1, 4.5, 5, 5.1, o1, o3): detail=low costs the base; otherwise the image
  is scaled to fit 2048x2048, then its short side to 768, and costs 85 + 170 per 512-px tile (GPT-5
  and 5.1: 70 + 140; o1 and o3: 75 + 150; GPT-4o mini: 2,833 + 5,667).
- OpenAI, 32-px patches (GPT-4.1 mini and nano, o4-mini, GPT-5 mini and nano, GPT-5.2 and later):
  ceil(w/32) * ceil(h/32) patches, at most the detail's patch budget, times the model's multiplier
  (`OpenAIPatches`; GPT-5 mini 1.2 and nano 1.5, as billed). Where OpenAI's guide changed between
  versions and no bill tells (budgets of 1,536 or 6,144 patches; GPT-5.4 mini 1.2 or 1.62), the
  larger is taken.
- Anthropic: one token per 28x28-px patch, ceil(w/28) * ceil(h/28), once the image is shrunk (its
  proportions kept) to its tier's long edge and token cap: 1568 px and 1,568 tokens before Claude
  4.7 (counted as the larger of that and the older documented rule, w*h/750 after the same
  scaling, at most ~1,600), 2576 px and 4,784 tokens from Claude 4.7 on (`claude-2576`).
- Gemini 3 and later: a fixed budget per image by `media_resolution` (LiteLLM sets it from
  `detail`): low 280, medium 560, high and unset 1,120, ultra_high 2,240 (`gemini-3`).
- Gemini 2.5 (`gemini-2.5`): 258 an image whatever its size (billed so on 16 sizes from 8x8 to
  8736x5856, bench.usage); with `detail: high` (LiteLLM's MEDIA_RESOLUTION_HIGH) up to 256 + 2,048
  of pan and scan.
- Gemini before 2.5 (`gemini-tiles`): 258 for an image at most 384 px both ways; else the image,
  scaled to fit 3072x3072, is cut into square tiles of its short side / 1.5 (256 to 768 px), 258 a
  tile and 258 for the whole (640x480: 5 x 258, 3008x2000: 13 x 258, as billed). A Gemini model
  whose version the name does not tell: the largest of these (`gemini`).

When the size cannot be read (a remote URL, an unreadable payload) the formula's maximum is used,
so images are never under-counted. Reading a size decodes at most the first 64 KiB of base64: no
network. Which formula a model counts with: `guard.core.models.profile`.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# base and a 512-px tile: GPT-4o, 4.1, 4.5 and any other; GPT-5 and 5.1; o1 and o3; GPT-4o mini (an
# image of unknown size: 8 tiles, 768x2048 after scaling)
OPENAI_TILES = {"openai": (85, 170), "openai-5": (70, 140), "openai-o": (75, 150), "openai-4o-mini": (2833, 5667)}


@dataclass(frozen=True)
class OpenAIPatches:
    """An OpenAI model that bills images by 32-px patches: its multiplier and its patch budget by
    `detail` ("auto" where the detail is another or none; "original": the full size, GPT-5.4 on)."""

    multiplier: float
    budgets: tuple[tuple[str, int], ...]

    def tokens(self, width: int | None, height: int | None, detail: str) -> int:
        budgets = dict(self.budgets)
        budget = budgets.get(detail, budgets["auto"])
        patches = budget if not width or not height else min(budget, math.ceil(width / 32) * math.ceil(height / 32))
        return math.ceil(patches * self.multiplier)


_EARLY = (("auto", 6144),)  # GPT-4.1 mini and nano, o4-mini, GPT-5 mini and nano, GPT-5.2 and 5.3
_GPT_5_4 = (("auto", 2500), ("high", 2500), ("low", 6144), ("original", 10_000))
_GPT_5_5 = (("auto", 10_000), ("high", 2500), ("low", 256), ("original", 10_000))
_GPT_5_6 = (("auto", 30_000), ("high", 2500), ("low", 256), ("original", 30_000))  # (30,000: rejected above)
OPENAI_PATCHES = {
    f"openai-patches-{era}-{multiplier}": OpenAIPatches(multiplier, budgets)
    for era, budgets in (("early", _EARLY), ("5.4", _GPT_5_4), ("5.5", _GPT_5_5), ("5.6", _GPT_5_6))
    for multiplier in (1.2, 1.5, 1.62, 1.72, 2.46)
}
ANTHROPIC_MAX = 1600  # Anthropic scales down any image above ~1,600 tokens (before Claude 4.7)
CLAUDE_PATCH = 28
CLAUDE_TIERS = {"anthropic": (1568, 1568), "claude-2576": (2576, 4784)}  # long edge, token cap
GEMINI_3 = {"low": 280, "medium": 560, "high": 1120, "ultra_high": 2240}
GEMINI_3_DEFAULT = 1120  # (unset or "auto")
GEMINI_TILE = 258
GEMINI_TILES_MAX = 25 * GEMINI_TILE  # (the most any size gives: 3072x384 scaled, 12x2 tiles of 256 px, and the whole)
GEMINI_2_5_HIGH = 256 + 2048
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


def openai_image_tokens(width: int | None, height: int | None, detail: str = "auto", formula: str = "openai") -> int:
    """An OpenAI model's image: by tiles, or by patches where `formula` is a patch model's."""
    if formula in OPENAI_PATCHES:
        return OPENAI_PATCHES[formula].tokens(width, height, detail)
    base, tile = OPENAI_TILES.get(formula, OPENAI_TILES["openai"])
    if detail == "low":
        return base
    if not width or not height:
        return base + tile * 8
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return base + tile * tiles


def anthropic_image_tokens(width: int | None, height: int | None) -> int:
    """A Claude model's before 4.7: the larger of the patch rule and the older area rule."""
    if not width or not height:
        return ANTHROPIC_MAX
    w, h = _scaled(width, height, 1568)
    return max(min(ANTHROPIC_MAX, max(1, math.ceil(w * h / 750))), claude_patch_tokens(width, height))


def claude_patch_tokens(width: int | None, height: int | None, tier: str = "anthropic") -> int:
    """Claude's patch rule: ceil(w/28) * ceil(h/28) at the tier's long edge, at most its cap (an
    image shrunk further to fit the cap costs the cap or less)."""
    edge, cap = CLAUDE_TIERS[tier]
    if not width or not height:
        return cap
    w, h = _scaled(width, height, edge)
    return min(cap, math.ceil(w / CLAUDE_PATCH) * math.ceil(h / CLAUDE_PATCH))


def gemini_tile_tokens(width: int | None, height: int | None) -> int:
    """Gemini before 2.5: 258 an image at most 384 px both ways, else 258 a tile and 258 the whole."""
    if not width or not height:
        return GEMINI_TILES_MAX
    w, h = _scaled(width, height, 3072)
    if w <= 384 and h <= 384:
        return GEMINI_TILE
    tile = min(768.0, max(256.0, min(w, h) / 1.5))
    return GEMINI_TILE * (math.ceil(w / tile) * math.ceil(h / tile) + 1)  # (+1: the whole image, as billed)


def gemini3_image_tokens(detail: str) -> int:
    """Gemini 3 and later: the budget of the `media_resolution` LiteLLM maps `detail` to."""
    return GEMINI_3.get(detail, GEMINI_3_DEFAULT)


def _scaled(width: int, height: int, edge: int) -> tuple[float, float]:
    """The size with its long side at most `edge`, its proportions kept (the short side rounded
    up: never fewer patches or tiles than the provider's own rounding gives)."""
    long, short = max(width, height), min(width, height)
    if long <= edge:
        return float(width), float(height)
    scaled = float(math.ceil(short * edge / long - 1e-9))
    return (float(edge), scaled) if width >= height else (scaled, float(edge))


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
    if formula.startswith("openai"):
        return openai_image_tokens(w, h, detail, formula)
    if formula == "claude-2576":
        return claude_patch_tokens(w, h, formula)
    if formula == "gemini-3":
        return gemini3_image_tokens(detail)
    if formula == "gemini-tiles":
        return gemini_tile_tokens(w, h)
    if formula == "gemini-2.5":
        return GEMINI_2_5_HIGH if detail in ("high", "ultra_high") else GEMINI_TILE
    if formula == "gemini":
        return max(gemini_tile_tokens(w, h), gemini3_image_tokens(detail), GEMINI_TILE)
    return anthropic_image_tokens(w, h)
