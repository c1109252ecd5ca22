#!/usr/bin/env python3
"""The import graph of the OpenAI frontend's packages, and the layers it keeps.

    python scripts/import_graph.py [SRC_ROOT]       # default: frontends/openai/src

A unit is a subpackage of the frontend (`chat/`) or a module at its root (`cli.py`).
For each unit it prints its floor in LAYERS and the units it imports, then every arrow
that breaks the layering: one to a higher floor, or one from an endpoint package to
another; and the cycles between units.  Imports are read with `ast`, so nothing is
imported and any checkout can be read: on a tree whose units the table does not all
place (an older layout), the floors it cannot give and the upward arrows are left out,
and the graph, its cycles and the arrows between endpoints are printed as they are.
The exit status is 1 when anything is reported.

tests/frontends/openai/test_import_layers.py loads this file and fails on what it would
report.  Standard library only, so that it runs without the frontend's dependencies.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SRC = REPO / "frontends" / "openai" / "src"
PACKAGE = "triton_openai"

# Floors, bottom up: a unit imports units on its own floor or below, never above, so
# that a change low down cannot need one higher up, and each layer can be read (and
# tested) with only what is under it.  Packages end in "/", root modules in ".py".
LAYERS: dict[str, int] = {
    # 0, leaves: the Triton client side (triton/, which also holds the wire contract the
    # vLLM backend shares), text helpers, the parsers of generated text (registries by
    # name, which the command lists) and the settings object.  They know no HTTP and no
    # API, so that tools outside the frontend can use them alone.
    "triton/": 0,
    "text/": 0,
    "tool_parsers/": 0,
    "reasoning/": 0,
    "config.py": 0,
    # 1, HTTP plumbing every route shares: errors in OpenAI's shape, request ids,
    # server-sent events, answers, middlewares and the request models' base.
    "web/": 1,
    # 2: what the frontend knows of each served model (catalog, tokenizer, generation
    # config), and the drain of a shutdown, which routes and background work report to.
    "served_models/": 2,
    "shutdown/": 2,
    # 3, the generation pipeline of every generating API: prompts and their budgets,
    # sampling parameters, the Triton requests and their streams.
    "generation/": 3,
    # 4: what chat completions, the Responses API, /tokenize and warm-up share: messages,
    # the chat template, tool use, decoding, the preparation before generating.  Kept
    # apart from any endpoint so that one surface's change cannot reach another's.
    "conversation/": 4,
    # 5, the API surfaces (ENDPOINTS): router, protocol and serving each.
    "chat/": 5,
    "completions/": 5,
    "responses_api/": 5,
    "tokenization/": 5,
    "embeddings/": 5,
    "models/": 5,
    "health/": 5,
    # 6, start-up: the package's public names, `python -m`, the command, the app factory.
    "__init__.py": 6,
    "__main__.py": 6,
    "cli.py": 6,
    "app.py": 6,
}

# One package per API surface: none imports another (what two share goes a floor down).
ENDPOINTS = frozenset({"chat/", "completions/", "responses_api/", "tokenization/",
                       "embeddings/", "models/", "health/"})


class Graph(NamedTuple):
    """Units and their arrows: edges[importer][imported] = the modules that import it."""
    src: Path
    units: list[str]
    edges: dict[str, dict[str, set[str]]]


class Arrow(NamedTuple):
    source: str
    target: str
    modules: list[str]

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({', '.join(self.modules)})"


def _modules(src: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of PACKAGE under `src`."""
    root = src / PACKAGE
    if not (root / "__init__.py").is_file():
        raise SystemExit(f"{src} holds no package {PACKAGE}")
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules (or packages) `name` imports, in dotted form, lazy imports included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            # `from . import sse` names a module; `from .errors import X` a module's name.
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return out


def unit_of(module: str, packages: set[str]) -> str | None:
    """The unit a dotted module belongs to; None outside PACKAGE."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    if len(parts) == 1:
        return "__init__.py"
    return f"{parts[1]}/" if f"{PACKAGE}.{parts[1]}" in packages else f"{parts[1]}.py"


def read_graph(src: Path = DEFAULT_SRC) -> Graph:
    modules = _modules(src)
    known = set(modules)
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    units: set[str] = set()
    edges: dict[str, dict[str, set[str]]] = {}
    for name, path in modules.items():
        source = unit_of(name, packages)
        units.add(source)
        for target in filter(None, (unit_of(m, packages) for m in _imported(name, path, known))):
            if target != source:
                edges.setdefault(source, {}).setdefault(target, set()).add(name)
    return Graph(src, sorted(units), edges)


def _arrows(graph: Graph):
    for source, targets in sorted(graph.edges.items()):
        for target, modules in sorted(targets.items()):
            yield Arrow(source, target, sorted(modules))


def unplaced(graph: Graph) -> list[str]:
    """Units the table gives no floor."""
    return [unit for unit in graph.units if unit not in LAYERS]


def upward(graph: Graph) -> list[Arrow]:
    """Arrows from a unit to one on a higher floor (between placed units)."""
    return [a for a in _arrows(graph) if a.source in LAYERS and a.target in LAYERS
            and LAYERS[a.target] > LAYERS[a.source]]


def between_endpoints(graph: Graph) -> list[Arrow]:
    return [a for a in _arrows(graph) if a.source in ENDPOINTS and a.target in ENDPOINTS]


def cycles(graph: Graph) -> list[list[str]]:
    """The units that import each other, directly or round a loop: each strongly
    connected component of more than one unit (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for target in sorted(graph.edges.get(unit, {})):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in graph.units:
        if unit not in index:
            visit(unit)
    return sorted(found)


def mutual(graph: Graph) -> list[tuple[str, str]]:
    """Pairs of units that import each other directly."""
    return [(a.source, a.target) for a in _arrows(graph)
            if a.source < a.target and a.source in graph.edges.get(a.target, {})]


def _by_floor(unit: str) -> tuple[int, str]:
    """Highest floor first; units the table does not place last."""
    return -LAYERS.get(unit, -1), unit


def _section(title: str, lines: list) -> list[str]:
    return [f"\n{title}: {'none' if not lines else len(lines)}", *(f"  {line}" for line in lines)]


def report(graph: Graph) -> tuple[list[str], bool]:
    """The printed lines, and whether anything breaks the layering."""
    missing = unplaced(graph)
    width = max(map(len, graph.units))
    lines = [f"{PACKAGE} in {graph.src}: {len(graph.units)} units", "",
             f"{'floor':>5}  {'unit':<{width}}  imports"]
    for unit in sorted(graph.units, key=_by_floor):
        floor = str(LAYERS[unit]) if unit in LAYERS else "-"
        targets = sorted(graph.edges.get(unit, {}), key=_by_floor)
        lines.append(f"{floor:>5}  {unit:<{width}}  {' '.join(targets)}".rstrip())
    if missing:
        lines.append(f"\nThe layer table places no {', '.join(missing)} (another layout?): "
                     "upward arrows are not looked for.")
        ups = []
    else:
        ups = upward(graph)
        lines += _section("Upward arrows (to a higher floor)", ups)
    crossings = between_endpoints(graph)
    loops = cycles(graph)
    lines += _section("Arrows between endpoint packages", crossings)
    lines += _section("Cycles (units that reach each other)", [", ".join(loop) for loop in loops])
    lines += _section("Mutual imports", [f"{a} <-> {b}" for a, b in mutual(graph)])
    return lines, bool(missing or ups or crossings or loops)


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else DEFAULT_SRC
    lines, broken = report(read_graph(src))
    print("\n".join(lines))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
