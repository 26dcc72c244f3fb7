"""Every Python sample in the README and docs/ runs (issue 35): executed as written, top-level
`await` included, with `msgs` (a conversation longer than the small model's window) given and
OpenAI's base URL pointed at the strict provider on 127.0.0.1. Every request it sends must arrive
fitted: its output limit explicit, its question kept, within its model's window."""

from __future__ import annotations

import ast
import asyncio
import os
import re
from pathlib import Path

import litellm
import pytest

import guard
from tests.e2e.upstream import ENC

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
SAMPLES = [
    (doc, i, text)
    for doc in DOCS
    for i, text in enumerate(re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(encoding="utf-8"), re.S))
]


def _conversation() -> list[dict]:
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "fix the tests"}]
    for i in range(40):
        msgs.append({"role": "assistant", "content": f"step {i}: " + "reading src/module.py and running pytest. " * 30})
        msgs.append(
            {"role": "user", "content": f"result {i}: " + "FAILED tests/test_x.py::test_y - AssertionError " * 12}
        )
    msgs.append({"role": "user", "content": "what next?"})
    return msgs


@pytest.fixture
def sample_env(upstream, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{upstream.port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    saved = list(litellm.callbacks)
    with upstream.lock:
        upstream.requests.clear()
    yield upstream
    litellm.callbacks = saved
    guard.uninstrument()


@pytest.mark.parametrize(("doc", "index", "text"), SAMPLES, ids=[f"{d}#{i}" for d, i, _ in SAMPLES])
def test_every_python_sample_runs_and_its_requests_arrive_fitted(sample_env, doc, index, text):
    assert os.environ["OPENAI_API_BASE"].startswith("http://127.0.0.1")
    msgs = _conversation()
    code = compile(text, f"{doc} sample {index}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    pending = eval(code, {"msgs": msgs, "__name__": "__sample__"})  # noqa: S307 - the repository's own docs
    if asyncio.iscoroutine(pending):
        asyncio.run(pending)
    with sample_env.lock:
        sent = [r["body"] for r in sample_env.requests]
    if "litellm" in text:
        assert sent, f"{doc} sample {index} sent nothing"
    for body in sent:
        assert isinstance(body.get("max_tokens") or body.get("max_completion_tokens"), int), body.get("model")
        assert body["messages"][-1]["content"] == "what next?"  # the question is never cut
        if body["model"] == "gpt-4o-mini":  # the 8k group (the Router falls back to the big one first)
            tokens = sum(len(ENC.encode_ordinary(str(m.get("content")))) for m in body["messages"])
            assert tokens < 8192, tokens
