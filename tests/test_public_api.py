"""The public API keeps its promises across releases (CHANGELOG.md): every name in `guard.__all__`
resolves, a deprecated name still works with a DeprecationWarning that names its replacement, and
the README's Python sample compiles and names only what the package has."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import pytest

import guard
from guard.fit.engine import Engine

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_resolves():
    assert guard.__all__ == sorted(guard.__all__)
    for name in guard.__all__:
        assert getattr(guard, name) is not None, name


def test_engine_from_config_is_a_deprecated_alias_of_from_guard_config():
    with pytest.warns(DeprecationWarning, match=r"Engine\.from_guard_config\(guard\.load_config\(path\)\)"):
        old = Engine.from_config(ROOT / "proxy_config.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = Engine.from_guard_config(guard.load_config(ROOT / "proxy_config.yaml"))
    assert old.policies == new.policies and old.deployments == new.deployments
    body = {"model": next(iter(new.deployments)), "messages": [{"role": "user", "content": "hi"}]}
    assert old.fit(body).body == new.fit(body).body


def _samples(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("doc", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_every_python_sample_compiles_and_names_what_the_package_has(doc):
    for sample in _samples((ROOT / doc).read_text(encoding="utf-8")):
        tree = compile(sample, doc, "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "guard":
                assert hasattr(guard, node.attr), f"{doc}: guard.{node.attr}"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "guard":
                module = __import__(node.module, fromlist=["_"])
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{doc}: from {node.module} import {alias.name}"


def _clock() -> float:
    return 1000.0


def test_engine_keywords_that_moved_to_sources_still_work_with_a_warning():
    log = guard.Engine().conversations
    with pytest.warns(DeprecationWarning, match=r"clock, conversations.*Engine\(sources=Sources\(\.\.\.\)\)"):
        old = Engine(clock=_clock, conversations=log)
    assert old.clock is _clock and old.conversations is log
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = Engine(sources=guard.Sources(clock=_clock, conversations=log))
    assert new.clock is _clock and new.conversations is log
    with pytest.raises(TypeError, match="colck"):
        Engine(colck=_clock)


def test_plan_keywords_that_moved_to_a_fit_request_still_work_with_a_warning():
    from guard.fit.planner import run
    from guard.fit.temperature import UNKNOWN

    engine = Engine(model_map=None)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.warns(DeprecationWarning, match=r"temperature.*FitRequest\(\.\.\., judged=Judged\(\.\.\.\)\)"):
        old = run(engine.plan(body, temperature=UNKNOWN))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = run(engine.plan_for(guard.FitRequest(body, judged=guard.Judged(temperature=UNKNOWN))))
    # the shell's judgement reached the fit both ways (an engine judging by itself reports cold)
    assert old.report.cache_temperature == new.report.cache_temperature == "unknown"
    assert old.body == new.body


def test_the_summarizers_call_moved_into_summarizing_with_a_warning():
    from guard.shell.callback import ContextGuard

    async def call(model, messages, max_tokens, timeout):
        return "summary"

    engine = Engine(model_map=None)
    with pytest.warns(DeprecationWarning, match=r"summarizer=Summarizing\(settings, call\)"):
        old = ContextGuard(engine=engine, summarizer={"model": "gpt-4o"}, summarize_call=call)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = ContextGuard(engine=engine, summarizer=guard.Summarizing({"model": "gpt-4o"}, call))
    assert old.summarizer is not None and new.summarizer is not None
    assert old.summarizer._call is call and new.summarizer._call is call
    with pytest.raises(TypeError, match="sumarize_call"):
        ContextGuard(engine=engine, sumarize_call=call)
