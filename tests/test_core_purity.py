"""The pure layers (guard/core, guard/dialects, guard/fit) import no I/O client: no module of those
folders names a socket, HTTP, Redis, metrics or LiteLLM module in an import, and with every one of
them imported and a request fitted, no such third-party module has been loaded (the standard
library's `socket` may be: pydantic's email support loads it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.tooling import script

layers = script("layers")

ROOT = Path(__file__).resolve().parent.parent
BANNED = (
    "litellm",
    "httpx",
    "requests",
    "openai",
    "anthropic",
    "aiohttp",
    "redis",
    "prometheus_client",
    "fastapi",
    "starlette",
    "uvicorn",
)
# the one named exception: LiteLLM's own `get_model_info`, for a model name the bundled map lacks,
# imported inside `litellm_resolver` on first such name (the runtime check below fits a known one)
ALLOWED = {"guard/core/modelmap.py": ["litellm"]}
NAMED = (*BANNED, "socket", "ssl", "http", "urllib", "asyncio", "guard.state", "guard.shell")


def pure_files() -> dict[str, Path]:
    """Module name -> file of every module in the pure folders (scripts/layers.py's PURE)."""
    return {m: p for m, p in layers.modules().items() if m.split(".")[1:2] and m.split(".")[1] in layers.PURE}


def pure_modules() -> list[str]:
    return list(pure_files())


def test_the_pure_layers_are_found_by_folder():
    found = pure_modules()
    assert "guard.fit.planner" in found and "guard.core.tokens" in found and "guard.dialects.chat" in found
    assert not any(m.startswith(("guard.shell", "guard.state")) for m in found)


def _named_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def _banned(names: set[str]) -> set[str]:
    return {n for n in names if any(n == b or n.startswith(b + ".") for b in NAMED)}


def test_no_pure_module_names_an_io_module():
    found = {str(p.relative_to(ROOT)): sorted(_banned(_named_imports(p))) for p in pure_files().values()}
    assert {k: v for k, v in found.items() if v} == ALLOWED
    assert _banned({"socket", "redis.asyncio", "guard.shell.fitting", "json"}) == {
        "socket",
        "redis.asyncio",
        "guard.shell.fitting",
    }


def test_pure_layers_never_import_an_io_client():
    code = (
        "import sys\n"
        f"for m in {pure_modules()!r}: __import__(m)\n"
        "from guard.fit.engine import Engine\n"
        "Engine().fit({'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'hi'}]})\n"
        f"bad = sorted({{m.split('.')[0] for m in sys.modules}} & set({BANNED!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_the_ban_sees_an_io_import():
    """The check above can fail: a pure-layer import that pulls in a banned module is seen."""
    code = (
        "import sys\nimport guard.core.tokens, prometheus_client\n"
        f"print(','.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({BANNED!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "prometheus_client"


def test_public_api_is_sorted_and_resolves():
    import guard

    assert guard.__all__ == sorted(guard.__all__)
    for name in guard.__all__:
        assert getattr(guard, name) is not None
