"""Modules over 400 lines, classes over 150 and functions over 60 in guard/, and the planner's
`plan()` over 40 (it reads as its steps): exit 1 if any.

    python scripts/sizes.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "guard"
LIMITS = {"module": 400, "class": 150, "function": 60}
OWN = {("fit/planner.py", "plan"): 40}  # (file under guard/, function) -> its own limit


def oversized(root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        name = path.relative_to(root)
        if (n := len(src.splitlines())) > LIMITS["module"]:
            out.append(f"{name}: module of {n} lines")
        for node in ast.walk(ast.parse(src)):
            functions = (ast.FunctionDef, ast.AsyncFunctionDef)
            kind = "class" if isinstance(node, ast.ClassDef) else "function" if isinstance(node, functions) else None
            if not kind:
                continue
            limit = OWN.get((str(name), node.name), LIMITS[kind])  # type: ignore[attr-defined]
            if (n := node.end_lineno - node.lineno + 1) > limit:  # type: ignore[attr-defined,operator]
                out.append(f"{name}:{node.lineno}: {kind} {node.name} of {n} lines")
    return out


if __name__ == "__main__":
    found = oversized()
    print("\n".join(found) or "no module, class or function over its limit")
    sys.exit(1 if found else 0)
