"""The layers of guard/ import only downward and in no circle (scripts/layers.py)."""

from __future__ import annotations

import pytest

from tests.tooling import script

layers = script("layers")
sizes = script("sizes")


def test_guard_has_no_cycle_and_no_upward_import(capsys):
    assert layers.main([]) == 0, capsys.readouterr().out


@pytest.fixture
def toy(tmp_path, monkeypatch):
    root = tmp_path / "guard"
    for folder in ("", "core", "fit"):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    monkeypatch.setattr(layers, "ROOT", root)
    return root


def test_a_cycle_is_found_even_under_type_checking(toy):
    (toy / "core" / "a.py").write_text("from guard.core.b import x\n")
    (toy / "core" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from guard.core import a\n"
    )
    assert layers.cycles(layers.graph()) == [["guard.core.a", "guard.core.b"]]


def test_an_import_of_a_higher_layer_is_found_even_inside_a_function(toy):
    (toy / "fit" / "planner.py").write_text("x = 1\n")
    (toy / "core" / "budget.py").write_text("def f():\n    from guard.fit.planner import x\n    return x\n")
    (toy / "cli.py").write_text("from guard.fit import planner\n")  # the top may import anything
    assert layers.upward(layers.graph()) == [("guard.core.budget", "guard.fit.planner")]


def test_no_module_class_or_function_over_its_size():
    assert sizes.oversized() == []


def test_the_size_check_sees_a_long_function(tmp_path):
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "planner.py").write_text("def plan():\n" + "    x = 1\n" * 40)
    (tmp_path / "ok.py").write_text("def f():\n" + "    x = 1\n" * 59)
    assert sizes.oversized(tmp_path) == ["fit/planner.py:1: function plan of 41 lines"]


climbs = script("climbs")
CLIMBS_AT_MOST = 13  # (18 before the body's facts were read once: see docs/contributing.md)


def test_the_body_climbs_back_up_no_more_often_than_before(capsys):
    """A ratchet: a change that makes the fit call back down for the body's facts more often fails."""
    modules = climbs.stays(climbs.walk(climbs._body()))
    assert "guard.fit.rounds" in modules and "guard.fit.reporting" in modules  # the walk follows what the body became
    assert climbs.climbs(modules) <= CLIMBS_AT_MOST, capsys.readouterr().out


def test_a_climb_is_a_stay_in_a_higher_layer_than_the_one_before():
    path = [
        ("guard.fit.planner", "plan"),
        ("guard.fit.planner", "_context"),
        ("guard.core.tokens", "count"),
        ("guard.dialects.chat", "messages"),
        ("guard.fit.rounds", "fit"),
        ("guard.core.budget", "fits"),
    ]
    modules = climbs.stays(path)
    assert modules == [
        "guard.fit.planner",
        "guard.core.tokens",
        "guard.dialects.chat",
        "guard.fit.rounds",
        "guard.core.budget",
    ]
    assert climbs.climbs(modules) == 2
