"""Recorded requests that carry images, with the input tokens the provider billed for each: the
corpus of `bench.usage`'s image rows (`image_cassettes.json.gz`).

    python bench/corpus/usage/image_cassettes.py RECORDS.jsonl --out bench/corpus/usage

RECORDS.jsonl holds one recorded request a line, read out of the HTTP test recordings (VCR
cassettes, every stored version of each) of client libraries' test suites: `repo`, `path`, `blob`,
`provider` ("openai-chat", "openai-responses", "anthropic" or "gemini"), `model`, `body` (the
request as sent), `billed` (the input tokens the response reports: OpenAI's `prompt_tokens` or
`input_tokens`; Anthropic's `input_tokens` + `cache_creation_input_tokens` +
`cache_read_input_tokens`; Gemini's `promptTokenCount`) and `details` (the response's usage).

Kept: requests whose every image is inline (base64) and readable, with no other media (audio,
video, documents). Each image's pixels are left out: the corpus keeps its width and height, and
`bench.usage` puts a blank PNG of that size in its place (the guard's formulas read an image's size,
never its pixels), so the corpus stays a few kB. A Gemini request is kept as its images' sizes, the
`detail` each was sent with and the tokens billed for images alone (`promptTokensDetails`, modality
IMAGE): the guard counts the OpenAI-shaped request LiteLLM turns into Gemini's, not Gemini's own.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLANK = "\u27e8blank {w}x{h}\u27e9"  # an image's data in the corpus: its size (bench.usage draws it)
_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def size_of(data: str) -> tuple[int, int] | None:
    """The width and height of a base64 image, or None where Pillow cannot read it."""
    from PIL import Image

    decode = base64.urlsafe_b64decode if "-" in data or "_" in data else base64.b64decode  # (Gemini's JSON: URL-safe)
    try:
        with Image.open(io.BytesIO(decode(data + "=" * (-len(data) % 4)))) as img:
            return img.size
    except (binascii.Error, OSError, ValueError, SyntaxError):
        return None


def _inline(part: dict[str, Any]) -> tuple[str, str] | None:
    """(the key path's last holder kind, its base64) of an inline image part of any of the shapes."""
    kind = part.get("type")
    if kind == "image_url":
        spec = part.get("image_url")
        url = spec.get("url") if isinstance(spec, dict) else spec
        return ("image_url", url.split(",", 1)[1]) if isinstance(url, str) and url.startswith("data:") else None
    if kind == "input_image":
        url = part.get("image_url")
        return ("input_image", url.split(",", 1)[1]) if isinstance(url, str) and url.startswith("data:") else None
    if kind == "image":
        source = part.get("source")
        if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
            return "image", source["data"]
    return None


def _parts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _parts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _parts(v)


def blanked(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body with each inline image's data replaced by `BLANK` of its size (as PNG); None where
    an image is remote, unreadable, or the body holds other media."""
    body = json.loads(json.dumps(body))
    for part in _parts(body):
        kind = part.get("type")
        if kind in ("input_audio", "file", "input_file", "document", "video_url"):
            return None
        found = _inline(part)
        if kind in ("image_url", "input_image", "image") and found is None:
            return None  # (a remote image: its size cannot be read offline)
        if found is None:
            continue
        size = size_of(found[1])
        if size is None:
            return None
        mark = BLANK.format(w=size[0], h=size[1])
        if found[0] == "image":
            part["source"] = {"type": "base64", "media_type": "image/png", "data": mark}
        elif found[0] == "input_image":
            part["image_url"] = f"data:image/png;base64,{mark}"
        else:
            spec, url = part["image_url"], f"data:image/png;base64,{mark}"
            part["image_url"] = {**spec, "url": url} if isinstance(spec, dict) else url
    return body


def gemini_images(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A Gemini request's images (their sizes and media resolution), or None where one is not an
    inline image Pillow reads, or the request holds other inline media."""
    images = []
    for part in _parts(body):
        inline = part.get("inlineData") or part.get("inline_data")
        if not isinstance(inline, dict):
            if part.get("fileData") or part.get("file_data"):
                return None
            continue
        mime = inline.get("mimeType") or inline.get("mime_type") or ""
        if mime not in _IMAGE_MIMES:
            return None
        size = size_of(str(inline.get("data", "")))
        if size is None:
            return None
        level = (part.get("mediaResolution") or part.get("media_resolution") or {}).get("level", "")
        images.append({"size": list(size), "detail": str(level).removeprefix("MEDIA_RESOLUTION_").lower() or "auto"})
    return images or None


def convert(records: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    with records.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            body = r.get("body")
            if not isinstance(body, dict) or not isinstance(r.get("billed"), int):
                continue
            source = {"repo": r["repo"], "path": r["path"], "blob": r.get("blob") or r.get("commit")}
            entry: dict[str, Any] = {"source": source, "provider": r["provider"], "model": r["model"]}
            if r["provider"] == "gemini":
                images = gemini_images(body)
                details = (r.get("details") or {}).get("promptTokensDetails") or []
                billed = sum(d.get("tokenCount", 0) for d in details if d.get("modality") == "IMAGE")
                if images is None or not billed:
                    continue
                entry.update(images=images, billed_images=billed)
            else:
                kept = blanked(body)
                if kept is None or BLANK[:7] not in json.dumps(kept, ensure_ascii=False):
                    continue
                entry.update(body=kept, billed=r["billed"])
            key = json.dumps({k: v for k, v in entry.items() if k != "source"}, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(entry)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("records", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    requests = convert(args.records)
    path = args.out / "image_cassettes.json.gz"
    data = json.dumps({"image_requests": requests}, separators=(",", ":"), sort_keys=True).encode()
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # (the same bytes on every run)
        f.write(data)
    by: dict[str, int] = {}
    for r in requests:
        by[r["provider"]] = by.get(r["provider"], 0) + 1
    print(f"{path}: {len(requests)} requests {by}")


if __name__ == "__main__":
    main()
