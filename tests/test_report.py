"""The report as plain data: what `dataclasses.asdict` makes of it, built faster, its own copy."""

from __future__ import annotations

import json
from dataclasses import asdict, fields

from guard.core.report import Action, Report, Skipped


def full_report() -> Report:
    """A report with every field set, nested values included (a field added later and left out
    of `to_dict` fails the comparison below)."""
    return Report(
        model="m",
        dialect="openai",
        window_rule="shared",
        context_window=1000,
        max_input_tokens=900,
        max_output_tokens=100,
        limits_source="deployment",
        input_tokens_before=1200,
        input_tokens_after=800,
        max_tokens=100,
        max_tokens_requested=None,
        max_tokens_source="policy",
        output_key="max_tokens",
        safety_margin_tokens=20,
        room=880,
        target=500,
        fits=True,
        outcome="fitted",
        exact_count=True,
        calibration_factor=1.0,
        messages_before=9,
        messages_after=5,
        actions=[Action("compact_json", 300, 2), Action("drop_oldest_turns", 100, 1)],
        skipped=[Skipped("summarize", "no_summarizer")],
        breakdown={"system": 10, "history": 700, "tool_results": 80, "tools_and_framing": 10},
        reason="r",
        fitted_messages_sha256="ab",
        calibration_key="k",
        calibration_source="learned",
        cut="cd",
        cut_from=4,
        summary={"source": "llm", "calls": 1, "spans": [[1, 3]]},
        reasoning=[{"field": "budget_tokens", "before": 900, "after": 50}],
        unseen_state=["previous_response_id"],
        cache_temperature="warm",
        idle_seconds=1.5,
        anchor={"length": 4, "mark": 500, "prefix_tokens": 700},
        carried={
            "length": 4,
            "mark": 500,
            "prefix_tokens": 700,
            "history": 9,
            "digest": "0f",
            "spine": "1e",
            "edited": False,
        },
        note={"before_message": 5, "lines": 2, "tokens": 60},
    )


def test_to_dict_is_asdict_with_tokens_saved_and_its_own_copy():
    report = full_report()
    assert all(getattr(report, f.name) != f.default for f in fields(Report) if f.default is None)
    data = report.to_dict()
    assert data == {**asdict(report), "tokens_saved": 400}
    before = json.dumps(asdict(report))
    for value in data.values():  # every nested value is the dict's own: editing it leaves the report
        if isinstance(value, dict):
            value.clear()
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, (dict, list)):
                    item.clear()
            value.append("x")
    data["summary"] = None
    assert json.dumps(asdict(report)) == before
    summary = report.to_dict()["summary"]
    summary["spans"][0].append(9)
    assert report.summary == {"source": "llm", "calls": 1, "spans": [[1, 3]]}
