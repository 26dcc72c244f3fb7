"""The start-up check of settings that route requests around the guard's hooks (issue 35)."""

from __future__ import annotations

import logging

import pytest
import yaml

from guard.shell.startup import check_config, route_arounds

GUARDED = {"litellm_settings": {"callbacks": ["guard.proxy.context_guard"]}}


def test_a_plain_config_routes_nothing_around_the_guard():
    config = {**GUARDED, "model_list": [{"model_name": "m", "litellm_params": {"model": "openai/gpt-4o"}}]}
    assert route_arounds(config, {"LITELLM_RUST": "false"}) == []


def test_each_setting_that_routes_around_the_hooks_is_named():
    config = {
        "model_list": [
            {"model_name": "claude-rust", "litellm_params": {"model": "anthropic/claude-x", "rust": True}},
            {"model_name": "plain", "litellm_params": {"model": "openai/gpt-4o"}},
        ],
        "general_settings": {"pass_through_endpoints": [{"path": "/direct", "target": "http://x/v1/messages"}]},
        "litellm_settings": {"success_callback": ["guard.proxy.context_guard"]},
    }
    found = route_arounds(config, {"LITELLM_RUST": "1"})
    assert len(found) == 4
    assert "LITELLM_RUST is on" in found[0]
    assert "(claude-rust)" in found[1] and "plain" not in found[1]
    assert "(/direct)" in found[2]
    assert "success_callback" in found[3] and "never run" in found[3]
    assert len(route_arounds({**config, **GUARDED}, {})) == 2  # registered as a callback: only rust and the path


def test_findings_are_logged_once_per_process(tmp_path, caplog):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**GUARDED, "general_settings": {"pass_through_endpoints": [{"path": "/once"}]}}))
    with caplog.at_level(logging.WARNING):
        assert len(check_config(path, {})) == 1
        assert len(check_config(path, {})) == 1
    assert sum("/once" in r.getMessage() for r in caplog.records) == 1
    assert check_config(tmp_path / "missing.yaml", {}) == []


def test_warm_loads_each_configured_models_tokenizer_before_any_request():
    from guard.core.config import Deployment
    from guard.core.encodings import get_vocab
    from guard.fit.engine import Engine, Sources

    loaded: list[str] = []

    def loader(name: str):
        loaded.append(name)
        return get_vocab(name)

    info = {"max_input_tokens": 8000, "max_output_tokens": 1000}
    engine = Engine(
        deployments={
            "gpt": Deployment("gpt", "gpt-4o", info),
            "mini": Deployment("mini", "gpt-4o-mini", info),
            "claude": Deployment("claude", "claude-sonnet-4-5", info),
        },
        model_map={},
        sources=Sources(encoding_loader=loader),
    )
    assert loaded == []
    assert engine.warm() == ("gpt", "mini", "claude")
    assert sorted(loaded) == ["cl100k_base", "o200k_base"]  # one load an encoding, none yet by a request
    for model in ("gpt", "claude"):
        engine.fit({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    assert sorted(loaded) == ["cl100k_base", "o200k_base"]  # the requests load nothing


@pytest.mark.parametrize(("cpus", "threads"), [(2, 2), (1, 2), (2, 1)])
def test_warm_builds_the_second_counting_threads_encoder_only_where_two_threads_count(monkeypatch, cpus, threads):
    """Two counting threads (the default) on two CPUs: the twin encoder is built at start-up, not
    by a request; on one CPU, or with `counting_threads: 1`, none is built at all."""
    import tiktoken

    from guard.core import encodings, tokens
    from guard.core.config import Deployment
    from guard.fit.engine import Engine

    built: list[str] = []
    real = tiktoken.Encoding.__init__

    def counting_init(self, name, **kw):
        built.append(name)
        real(self, name, **kw)

    monkeypatch.setattr(encodings, "_twins", {})  # (no twin an earlier test built)
    monkeypatch.setattr(tokens, "_two_cpus", lambda: cpus >= 2)
    monkeypatch.setattr(tokens, "_THREADS", threads)
    info = {"max_input_tokens": 1_000_000, "max_output_tokens": 1000}
    engine = Engine(deployments={"gpt": Deployment("gpt", "gpt-4o", info)}, model_map={})
    engine.warm()
    monkeypatch.setattr(tiktoken.Encoding, "__init__", counting_init)
    # a request large enough to be counted on two threads where two CPUs count (`_PARALLEL_CHARS`)
    words = " ".join(f"w{i}" for i in range(3_000))
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"{i} {words}"} for i in range(40)]
    engine.fit({"model": "gpt", "messages": messages, "max_tokens": 100})
    assert built == []  # the request built no encoder: warmed at start-up, or none needed
    encoding = engine.counter_for("gpt", engine.policy_for("gpt"))[0].encoding
    assert (id(encoding) in encodings._twins) is (cpus >= 2 and threads == 2)


def _import_the_proxy_module(tmp_path, config, before: str, after: str) -> list[str]:
    """What a fresh interpreter prints that runs `before`, imports `guard.proxy` with `config` as
    the proxy's config file (the proxy server module as the proxy has it when it loads callbacks:
    its config path, no app), then runs `after`."""
    import subprocess
    import sys

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code = (
        "import gc, sys, types\n"
        "server = types.ModuleType('litellm.proxy.proxy_server')\n"
        "server.user_config_file_path, server.app = sys.argv[1], None\n"
        "sys.modules['litellm.proxy.proxy_server'] = server\n"
        f"{before}\nimport guard.proxy\n{after}\n"
    )
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_the_proxy_module_loads_the_model_lists_tokenizers_at_start_up(tmp_path):
    config = {
        **GUARDED,
        "model_list": [
            {"model_name": "gpt", "litellm_params": {"model": "openai/gpt-4o"}},
            {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-sonnet-4-5"}},
        ],
    }
    printed = _import_the_proxy_module(
        tmp_path,
        config,
        "from guard.core.encodings import get_vocab\nassert get_vocab.cache_info().currsize == 0",
        "print(get_vocab.cache_info().currsize)",
    )
    assert printed[-1] == "2"  # o200k_base and cl100k_base, before any request


@pytest.mark.parametrize("freeze", [True, False])
def test_the_proxy_module_freezes_the_objects_loaded_at_start_up_out_of_gc_walks(tmp_path, freeze):
    config = {**GUARDED, "model_list": [{"model_name": "gpt", "litellm_params": {"model": "openai/gpt-4o"}}]}
    if not freeze:
        config["context_guard"] = {"worker": {"freeze_gc_at_start": False}}
    # (counted from the interpreter's own start: CPython 3.12 starts with a few hundred objects in
    # the permanent generation, 3.11 and 3.13 with none)
    printed = _import_the_proxy_module(
        tmp_path,
        config,
        "start = gc.get_freeze_count()",
        "print(gc.get_freeze_count() - start, len(gc.get_objects()))",
    )
    frozen, walked = (int(n) for n in printed[-2:])
    if freeze:  # LiteLLM's modules and the guard's, out of every later collection's walk
        assert frozen > 100_000 and walked < frozen // 10
    else:
        assert frozen == 0 and walked > 100_000


def test_a_worker_section_with_an_unknown_key_is_refused_at_start_up():
    from guard.core.config import parse_config
    from guard.core.errors import PolicyError

    with pytest.raises(PolicyError, match="worker"):
        parse_config({"context_guard": {"worker": {"freeze_gc": True}}})
    assert parse_config({"context_guard": {"worker": {"freeze_gc_at_start": False}}}).worker.freeze_gc_at_start is False
    assert parse_config({}).worker.freeze_gc_at_start is True
    assert parse_config({}).worker.counting_threads == 2
    assert parse_config({"context_guard": {"worker": {"counting_threads": 1}}}).worker.counting_threads == 1
    with pytest.raises(PolicyError, match="counting_threads"):
        parse_config({"context_guard": {"worker": {"counting_threads": 4}}})


@pytest.mark.parametrize("threads", [1, 2])
def test_the_proxy_module_counts_on_the_threads_its_worker_section_sets(tmp_path, threads):
    config = {**GUARDED, "model_list": [{"model_name": "gpt", "litellm_params": {"model": "openai/gpt-4o"}}]}
    if threads == 1:
        config["context_guard"] = {"worker": {"counting_threads": 1}}
    printed = _import_the_proxy_module(
        tmp_path,
        config,
        "import guard.core.tokens as tokens, guard.core.encodings as encodings\ntokens._two_cpus = lambda: True",
        "print(tokens._THREADS, len(encodings._twins))",
    )
    assert printed[-2:] == [str(threads), "1" if threads == 2 else "0"]  # (a twin built at start-up for two)
