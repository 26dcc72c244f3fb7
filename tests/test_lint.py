"""ruff's named rule set ([tool.ruff.lint]: E, F, W, I, B, UP, SIM, RUF, and PLR0913: no function over 6
parameters) passes on the package, its scripts, the tests and the benches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "guard", "scripts", "tests", "bench"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_code_is_in_ruff_format():
    """One code style: `ruff format` leaves every file of the package, scripts, tests and benches as it is."""
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "guard", "scripts", "tests", "bench"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_sees_a_finding(tmp_path):
    """The check above can fail: an unused import in a file under the project's config is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 1 and "F401" in out.stdout


def test_ruff_counts_parameters(tmp_path):
    """A function of seven parameters is a finding (data travels as objects)."""
    bad = tmp_path / "wide.py"
    bad.write_text("def f(a, b, c, d, e, f, g):\n    return a\n")
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 1 and "PLR0913" in out.stdout
