"""The layers of guard/ import only downward and in no circle (scripts/layers.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("layers", Path(__file__).resolve().parent.parent / "scripts" / "layers.py")
assert _SPEC and _SPEC.loader
layers = importlib.util.module_from_spec(_SPEC)
sys.modules["layers"] = layers
_SPEC.loader.exec_module(layers)


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
    (toy / "core" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from guard.core import a\n")
    assert layers.cycles(layers.graph()) == [["guard.core.a", "guard.core.b"]]


def test_an_import_of_a_higher_layer_is_found_even_inside_a_function(toy):
    (toy / "fit" / "planner.py").write_text("x = 1\n")
    (toy / "core" / "budget.py").write_text("def f():\n    from guard.fit.planner import x\n    return x\n")
    (toy / "cli.py").write_text("from guard.fit import planner\n")  # the top may import anything
    assert layers.upward(layers.graph()) == [("guard.core.budget", "guard.fit.planner")]


_SIZES = importlib.util.spec_from_file_location("sizes", Path(__file__).resolve().parent.parent / "scripts" / "sizes.py")
assert _SIZES and _SIZES.loader
sizes = importlib.util.module_from_spec(_SIZES)
_SIZES.loader.exec_module(sizes)


def test_no_module_class_or_function_over_its_size():
    assert sizes.oversized() == []


def test_the_size_check_sees_a_long_function(tmp_path):
    (tmp_path / "fit").mkdir()
    (tmp_path / "fit" / "planner.py").write_text("def plan():\n" + "    x = 1\n" * 40)
    (tmp_path / "ok.py").write_text("def f():\n" + "    x = 1\n" * 59)
    assert sizes.oversized(tmp_path) == ["fit/planner.py:1: function plan of 41 lines"]
