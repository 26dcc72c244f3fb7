from __future__ import annotations

import json

from tests.cli_helpers import SCRIPT, run_cli

OVER = {
    "model": "m",
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    + [{"role": "assistant", "content": f"note {i} " + "word " * 200} for i in range(20)]
    + [{"role": "user", "content": "question"}],
    "max_tokens": 100,
}


def _config(tmp_path, window: int, extra: str = "") -> str:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"model_list:\n  - model_name: m\n    litellm_params: {{model: gpt-4o}}\n    model_info: {{max_input_tokens: {window}}}\n{extra}"
    )
    return str(cfg)


def test_the_console_script_is_installed():
    assert SCRIPT.exists()


def test_json_report_is_one_object_with_the_promised_fields(tmp_path):
    status, out, err, fitted = run_cli("--config", _config(tmp_path, 2500), "--json", body=OVER, tmp=tmp_path)
    assert status == 0, err
    report = json.loads(out)  # exactly one JSON document on stdout
    for key in (
        "model",
        "context_window",
        "input_tokens_before",
        "input_tokens_after",
        "max_tokens",
        "safety_margin_tokens",
        "fits",
        "actions",
    ):
        assert key in report
    assert report["actions"] and all({"kind", "tokens_saved"} <= set(a) for a in report["actions"])
    assert fitted["messages"][-1] == {"role": "user", "content": "question"}


def test_human_view_shows_the_budget_and_actions(tmp_path):
    status, out, err, _ = run_cli("--config", _config(tmp_path, 2500), body=OVER, tmp=tmp_path)
    assert status == 0, err
    assert "fitted" in out and "reserved" in out and "drop_oldest_turns" in out and "█" in out


def test_rejection_exits_2_and_writes_nothing(tmp_path):
    status, out, _, fitted = run_cli("--config", _config(tmp_path, 300), body=OVER, tmp=tmp_path)
    assert status == 2 and fitted is None
    assert "REJECTED" in out and "> 300" in out


def test_bad_input_and_usage_exit_1(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert run_cli("fit", str(bad))[0] == 1
    assert run_cli("fit", str(tmp_path / "missing.json"))[0] == 1
    assert run_cli("fit")[0] == 1
    assert run_cli("frobnicate")[0] == 1
    status, _, err, _ = run_cli(body={"model": "no-such-model-anywhere", "messages": []}, tmp=tmp_path)
    assert status == 1 and "no context window known" in err
    status, _, err, _ = run_cli(body={"model": "gpt-4o", "messages": "hi"}, tmp=tmp_path)
    assert status == 1 and "'messages' must be a list" in err
    status, _, err, _ = run_cli(
        "--config", _config(tmp_path, 1000, "context_guard:\n  low_water_ratio: 7\n"), body=OVER, tmp=tmp_path
    )
    assert status == 1 and "low_water_ratio" in err


def test_stdin_and_stdout(tmp_path):
    import subprocess

    proc = subprocess.run(
        [str(SCRIPT), "fit", "-", "--out", "-"],
        input=json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
        capture_output=True,
        text=True,
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4096,
    }


def test_the_cli_lowers_a_thinking_budget_with_the_output_cap(tmp_path):
    """Issue 14: `context-guard fit` on Claude Code's request shape under an 8,192 output cap."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "model_list:\n  - model_name: claude-cap\n    litellm_params: {model: anthropic/claude-sonnet-4-5}\n"
        "    model_info: {max_input_tokens: 200000, max_output_tokens: 8192}\n"
    )
    body = {
        "model": "claude-cap",
        "max_tokens": 32000,
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "system": "s",
        "messages": [{"role": "user", "content": "fix it"}],
    }
    status, out, err, fitted = run_cli("--config", str(cfg), body=body, tmp=tmp_path)
    assert status == 0, err
    assert fitted["max_tokens"] == 8192 and fitted["thinking"]["budget_tokens"] == 8191
    assert "thinking.budget_tokens 31999 → 8191" in out


def test_a_refusal_caused_by_tool_schemas_says_so(tmp_path):
    tools = [
        {
            "type": "function",
            "function": {"name": f"t{i}", "description": "word " * 300, "parameters": {"type": "object"}},
        }
        for i in range(10)
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools, "max_tokens": 100}
    status, out, _, _ = run_cli("--config", _config(tmp_path, 2500), "--json", body=body, tmp=tmp_path)
    assert status == 2
    error = json.loads(out)["error"]
    assert "tool schemas and framing alone take" in error and "send fewer or smaller tools" in error
    assert "after trimming" not in error  # nothing was trimmed


def test_the_cli_resolves_models_as_litellm_does(tmp_path):
    # the raw map's entry for the bare name is Bedrock's (1M); LiteLLM resolves the provider route to 200k
    body = {
        "model": "bedrock_converse/us.anthropic.claude-opus-4-6-v1",
        "messages": [{"role": "user", "content": "hi"}],
    }
    status, out, err, _ = run_cli("--json", body=body, tmp=tmp_path)
    assert status == 0, err
    report = json.loads(out)
    assert report["context_window"] == 200_000 and report["limits_source"] == "litellm"
