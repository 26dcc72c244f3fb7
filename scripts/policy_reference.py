"""Write docs/policy-reference.md from the Policy model's fields (name, type, default, what it
does), so the reference cannot drift from the code; `--check` fails if the file is out of date.

    python scripts/policy_reference.py           # write it
    python scripts/policy_reference.py --check   # CI: exit 1 if it differs
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from guard.core.policy import Policy  # noqa: E402

TARGET = ROOT / "docs" / "policy-reference.md"


def _type(annotation: Any) -> str:
    """A field's type in words, the same on every Python version (reprs of typing objects differ)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a) for a in args)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"dict of {_type(args[0])} to {_type(args[1])}"
    return str(getattr(annotation, "__name__", annotation))


def render() -> str:
    lines = [
        "# Policy reference",
        "",
        "Every field of a policy (`context_guard.defaults`, and per model, team and key: see",
        "[Policy](policy.md)), generated from `guard.core.policy.Policy` by `scripts/policy_reference.py`.",
        "",
        "| field | type | default | what it does |",
        "|---|---|---|---|",
    ]
    for name, field in Policy.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "unset" if default is None else f"`{default}`"
        what = (field.description or "").replace("|", "\\|")
        kind = _type(field.annotation)
        lines.append(f"| `{name}` | `{kind}` | {shown} | {what} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            print("docs/policy-reference.md is out of date: run python scripts/policy_reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
