"""The path a request body takes through the guard's layers: fits one overflowing agent turn with
`Engine.fit` and prints the modules the body (or what the fit made of it) enters, in order, and how
many times that path climbs back to a higher layer; exits 1 over `--most` climbs.

    python scripts/climbs.py            # or: --most 13, --path (every module entered, with its layer)

Measured as the code runs, not from its text: every call into a function of `guard/` is watched
(`sys.setprofile`), and a call counts when one of its arguments is the body or an object the walk
has already carried (a value a counted call returned: the body's messages, the counted request,
the conversation, the report...). Each function counts the first time only, consecutive calls in
one module are one stay, and a *climb* is a stay in a higher layer than the one before (the layers
of scripts/layers.py: core, dialects, fit, state, shell, then the entry points). Fewer climbs: a
body read once, low in the stack, and the facts carried up as objects, instead of the fit calling
back down for them again and again (docs/contributing.md).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from layers import LAYERS, layer  # noqa: E402

_SCALARS = (int, float, str, bytes, bool, type(None))
GUARD = str(ROOT / "guard")


def _body() -> dict[str, Any]:
    """An agent turn over its window: 60 turns of tool calls and JSON results (bench.traces)."""
    from bench.traces import agent_trace

    return agent_trace(turns=60, seed=3)


def walk(body: dict[str, Any], model: str = "guard-bench") -> list[tuple[str, str]]:
    """The (module, function) of every call the body's walk enters, first entries only, in order."""
    from guard.core.config import Deployment
    from guard.core.policy import Policy, PolicySet
    from guard.fit.engine import Engine

    engine = Engine(
        PolicySet(defaults=Policy(default_max_tokens=2048)),
        deployments={model: Deployment(model, "gpt-4o", {"max_input_tokens": 16_000, "max_output_tokens": 4096})},
        model_map={},
    )
    body = {**body, "model": model, "max_tokens": 2048}
    carried: dict[int, Any] = {id(body): body}  # (the objects are kept alive, so an id is never reused)
    counted: dict[int, bool] = {}  # frames of counted calls
    seen: set[Any] = set()
    path: list[tuple[str, str]] = []

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if not code.co_filename.startswith(GUARD):
            return
        if event == "call":
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            values = [frame.f_locals.get(n) for n in names]
            if any(id(v) in carried for v in values if not isinstance(v, _SCALARS)):
                counted[id(frame)] = True
                if code not in seen:
                    seen.add(code)
                    module = frame.f_globals.get("__name__", "?")
                    path.append((module, getattr(code, "co_qualname", code.co_name)))  # (3.10: no co_qualname)
        elif event == "return" and counted.pop(id(frame), False) and not isinstance(arg, _SCALARS):
            carried[id(arg)] = arg

    sys.setprofile(watch)
    try:
        engine.fit(body)
    finally:
        sys.setprofile(None)
    return path


def stays(path: list[tuple[str, str]]) -> list[str]:
    """The modules entered, consecutive entries of one module merged."""
    out: list[str] = []
    for module, _ in path:
        if not out or out[-1] != module:
            out.append(module)
    return out


def climbs(modules: list[str]) -> int:
    return sum(1 for a, b in itertools.pairwise(modules) if layer(b) > layer(a))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--most", type=int, default=None, help="exit 1 above this many climbs")
    parser.add_argument("--path", action="store_true", help="print every stay with its layer")
    args = parser.parse_args(argv)
    modules = stays(walk(_body()))
    if args.path:
        for a, b in zip([None, *modules], modules):
            up = " (climb)" if a is not None and layer(b) > layer(a) else ""
            name = LAYERS[layer(b)] if layer(b) < len(LAYERS) else "top"
            print(f"{name:9s} {b}{up}")
    n = climbs(modules)
    print(f"{len(modules)} stays in {len(set(modules))} modules, {n} climbs back to a higher layer")
    return 1 if args.most is not None and n > args.most else 0


if __name__ == "__main__":
    sys.exit(main())
