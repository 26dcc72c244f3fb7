"""The start-up check of settings that route requests around the guard's hooks (issue 35)."""

from __future__ import annotations

import logging

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
