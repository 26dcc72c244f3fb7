"""The guard's import graph against its layers: prints every import cycle and every import of a
layer above the importer's own, and exits 1 if there is any.

    python scripts/layers.py            # or: python scripts/layers.py --graph  (every edge)

Every import counts: module level, inside functions, and under `if TYPE_CHECKING:`. The layers,
bottom up, are the folders of `guard/` named in LAYERS; the package's own `__init__`, `cli` and
`proxy` are the entry points on top. A module may import its own layer and the layers below.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "guard"
LAYERS = ("core", "dialects", "fit", "state", "shell")  # bottom up; anything else in guard/ is on top
PURE = ("core", "dialects", "fit")  # the layers that import no I/O client (tests/test_core_purity.py)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> set[str]:
    """Modules of the guard that a file imports, wherever the import stands."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:  # `from guard.core import tokens` imports the module guard.core.tokens
                target = f"{base}.{a.name}"
                if target in known:
                    out.add(target)
                elif base in known:
                    out.add(base)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(p, known) - {m} for m, p in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in edges.items() for b in targets if layer(b) > layer(a))


def main(argv: list[str]) -> int:
    edges = graph()
    if "--graph" in argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{a} -> {b}")
    found_cycles, found_up = cycles(edges), upward(edges)
    for comp in found_cycles:
        print("cycle:", " <-> ".join(comp))
    for a, b in found_up:
        print(f"upward: {a} -> {b}")
    print(
        f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, "
        f"{len(found_cycles)} cycles, {len(found_up)} upward imports"
    )
    return 1 if found_cycles or found_up else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
