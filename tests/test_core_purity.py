"""The functional core imports neither litellm nor any network client."""

from __future__ import annotations

import subprocess
import sys

CORE = [
    "guard.dialects", "guard.tokens", "guard.images", "guard.models", "guard.limits", "guard.budget",
    "guard.policy", "guard.report", "guard.errors", "guard.conversation", "guard.jsontext",
    "guard", "guard.strategies", "guard.planner", "guard.engine", "guard.config", "guard.modelmap", "guard.cli",
    "guard.summary", "guard.relevance", "guard.breaker", "guard.coexistence", "guard.announce", "guard.temperature",
]


def test_core_never_imports_litellm():
    code = (
        "import sys\n"
        f"for m in {CORE!r}: __import__(m)\n"
        "from guard.engine import Engine\n"
        "Engine().fit({'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'hi'}]})\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('litellm', 'httpx', 'requests', 'openai', 'redis')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_api_is_sorted_and_resolves():
    import guard

    assert guard.__all__ == sorted(guard.__all__)
    for name in guard.__all__:
        assert getattr(guard, name) is not None
