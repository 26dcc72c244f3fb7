"""The public API is visible to type checkers (no `Any` from the lazy imports; the wheel ships
py.typed), and the Python examples of the README and docs/ type-check against it (mypy, as a user's
CI would)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """\
from typing import Any
msgs: list[dict[str, Any]] = []
"""


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "example.py"
    src.write_text(code)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--no-error-summary",
            str(src),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def readme_examples() -> list[str]:
    """The ```python blocks of the README and docs/; one with top-level `await` runs inside an async
    function."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for doc in docs for b in re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)]
    assert len(blocks) >= 2, "the README and docs/sdk.md have Python examples"
    out = []
    for i, block in enumerate(blocks):
        if "await " in block:
            block = f"async def _example_{i}() -> None:\n" + textwrap.indent(block, "    ")
        out.append(block)
    return out


def test_the_package_and_the_readme_examples_type_check(tmp_path):
    code = PRELUDE + "\n\n".join(readme_examples())
    result = _mypy(tmp_path, code)
    assert result.returncode == 0, result.stdout + result.stderr


def test_public_names_are_typed_not_any(tmp_path):
    # each line is wrong on purpose: mypy must see the real types to object
    code = textwrap.dedent("""\
        import guard
        a: int = guard.ContextGuard
        b: int = guard.report_of
        c: int = guard.instrument
        def f(e: guard.ContextWindowExceeded) -> int:
            return e.report
        def g(e: guard.ContextWindowExceededError) -> str:
            return e.shortfall.limit
    """)
    result = _mypy(tmp_path, code)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 5, result.stdout
    assert (ROOT / "guard" / "py.typed").exists()
