"""Write the text snapshot `bench.traces` builds its synthetic loops from (`stdlib.json.gz`,
`articles.json.gz` beside this file) and `bench.accuracy` samples (those two and
`modelmap.json.gz`, LiteLLM's bundled model map), from the running interpreter and its installed
packages.

    .venv/bin/python bench/corpus/text/make.py

Run once, on the interpreter and package versions the snapshot names: the traces, and so every
test and bench figure built on them, are then the same on every machine, Python version and
package release. Before this snapshot (session 44) they were read at run time, and on Python 3.13
(another standard library) four `bench.cache` tests of the synthetic loops and a test of the
notes failed. `bench.accuracy` read them at run time until session 45, and so did its CI share
(`tests/test_accuracy.py`), whose bars allow one under-count in 60 samples: another machine's
standard library, packages or LiteLLM release drew other samples.
"""

from __future__ import annotations

import gzip
import json
import platform
import sysconfig
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).parent

# the packages whose READMEs are the retrieved "articles" (those the guard's install with the test
# extra brings; a package without a README of over 2,000 characters is left out)
ARTICLE_PACKAGES = (
    "litellm",
    "openai",
    "anthropic",
    "pydantic",
    "tiktoken",
    "rich",
    "hypothesis",
    "httpx",
    "fastapi",
    "uvicorn",
    "aiohttp",
    "jinja2",
    "jsonschema",
    "tokenizers",
    "pytest",
    "pillow",
)


def stdlib() -> dict[str, object]:
    """Each module of the standard library's top folder over 4,000 bytes, sorted by name."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if p.stat().st_size > 4000)
    return {
        "python": platform.python_version(),
        "files": [[p.name, p.read_text(encoding="utf-8", errors="replace")] for p in files],
    }


def articles() -> list[dict[str, str]]:
    out = []
    for name in ARTICLE_PACKAGES:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        text = dist.metadata.get_payload() or dist.metadata.get("Description") or ""  # type: ignore[attr-defined]
        if len(text) > 2000:
            out.append({"name": dist.metadata["Name"], "version": dist.version, "text": text})
    return out


def model_map() -> dict[str, object]:
    """LiteLLM's bundled model map (its release and the map)."""
    dist = metadata.distribution("litellm")
    path = Path(str(dist.locate_file("litellm/model_prices_and_context_window_backup.json")))
    return {"litellm": dist.version, "models": json.loads(path.read_text(encoding="utf-8"))}


def write(path: Path, data: object) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # (mtime 0: the same bytes from the same input)
        f.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())


if __name__ == "__main__":
    write(HERE / "stdlib.json.gz", stdlib())
    write(HERE / "articles.json.gz", articles())
    write(HERE / "modelmap.json.gz", model_map())
