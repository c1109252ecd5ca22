"""Every name vLLM's model modules import from the libraries a lock leaves open, checked
against the versions that lock takes.

vLLM imports each `vllm.model_executor.models` module when a model of its family loads:
a name that a later transformers or mistral_common moved breaks that family alone (text
models keep working, so a text test never sees it).  This reads the modules out of the
locked vLLM's wheel and each library out of its locked wheel (tritonbuild/tools/wheel_sources.py:
range requests, cached), and resolves every `from LIB... import NAME` statically.

    python -m tritonbuild.tools.model_imports [--pip-index-url URL] [RELEASE ...]

An import guarded by `try: ... except ImportError` or under `if TYPE_CHECKING:` is left
out: the first may fail, the second never runs.
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass

from .. import lock, pins
from . import wheel_sources

__all__ = ["LIBRARIES", "ModelImport", "model_imports", "check", "check_release"]

# The libraries whose releases vLLM leaves open above the one it was built against, and
# that its model modules import names from.
LIBRARIES = ("transformers", "mistral_common")
MODELS = "vllm/model_executor/models/"


@dataclass(frozen=True)
class ModelImport:
    module: str          # e.g. transformers.activations
    name: str            # e.g. PytorchGELUTanh
    where: str           # the vLLM file and line


def _unguarded(tree: ast.Module) -> list[ast.ImportFrom]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip]


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError",
                                                    "Exception") for n in names)


def model_imports(vllm: wheel_sources.WheelSources | wheel_sources.FolderSources,
                  libraries: tuple[str, ...] = LIBRARIES) -> list[ModelImport]:
    members = sorted(m for m in vllm.names() if m.startswith(MODELS) and m.endswith(".py"))
    vllm.prefetch(members)
    out = []
    for member in members:
        tree = ast.parse(vllm.read(member), member)
        for node in _unguarded(tree):
            if node.level == 0 and node.module and node.module.split(".")[0] in libraries:
                out += [ModelImport(node.module, a.name, f"{member}:{node.lineno}")
                        for a in node.names]
    return out


class _Library:
    """What a library's modules define, read from its sources (star imports followed)."""

    def __init__(self, files) -> None:
        self.files = files
        self._defined: dict[str, set[str] | None] = {}
        self._fetched = False

    def _read(self, member: str) -> str:
        # Following transformers' star imports reads most of its modules: one request for
        # them all beats a request each.
        if not self._fetched:
            self._fetched = True
            self.files.prefetch(sorted(m for m in self.files.names() if m.endswith(".py")))
        return self.files.read(member)

    def module_file(self, module: str) -> str | None:
        return wheel_sources.module_file(self.files, module)

    def has(self, module: str, name: str) -> bool:
        defined = self.defined(module)
        if defined is None:
            return False
        return (name in defined or self.module_file(f"{module}.{name}") is not None
                or self._in_walked_structure(module, name))

    def _in_walked_structure(self, module: str, name: str) -> bool:
        """transformers' lazy packages call define_import_structure(folder) at run time,
        which takes in every model folder, listed or not (ApertusConfig): look in the
        model folder the name is named after."""
        member = self.module_file(module)
        if member is None or "define_import_structure" not in self._read(member):
            return False
        root = module.replace(".", "/")
        folders = {m.split("/")[-2] for m in self.files.names()
                   if m.endswith("/__init__.py") and m.startswith(f"{root}/")
                   and m.count("/") in (root.count("/") + 2, root.count("/") + 3)}
        lowered = name.lower()
        for folder in sorted(folders, key=len, reverse=True):
            if lowered.startswith(folder.replace("_", "")):
                for prefix in (f"{module}.models.{folder}", f"{module}.{folder}"):
                    if self.module_file(prefix) and name in self._star(prefix, 0):
                        return True
        return False

    def defined(self, module: str, depth: int = 0) -> set[str] | None:
        if module in self._defined:
            return self._defined[module]
        member = self.module_file(module)
        if member is None or depth > 8:
            return None
        self._defined[module] = set()  # a cycle sees what is known so far
        tree = ast.parse(self._read(member), member)
        package = module if member.endswith("__init__.py") else module.rpartition(".")[0]
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and node in tree.body:
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
                names.update(_lazy_table_names(node))
            elif isinstance(node, ast.Import):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node, package)
                for a in node.names:
                    if a.name == "*":
                        names.update(self._star(source, depth))
                    else:
                        names.add(a.asname or a.name)
        self._defined[module] = names
        return names

    def _star(self, module: str, depth: int) -> set[str]:
        member = self.module_file(module)
        if member is None:
            return set()
        for node in ast.parse(self._read(member)).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                    for t in node.targets):
                try:
                    return set(ast.literal_eval(node.value))
                except ValueError:
                    break
        return {n for n in (self.defined(module, depth + 1) or set()) if not n.startswith("_")}


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[:len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _lazy_table_names(node: ast.Assign | ast.AnnAssign) -> set[str]:
    """transformers' `_import_structure = {"submodule": ["Name", ...]}` names."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if not any(isinstance(t, ast.Name) and t.id == "_import_structure" for t in targets):
        return set()
    if not isinstance(node.value, ast.Dict):
        return set()
    out = set()
    for v in node.value.values:
        if isinstance(v, (ast.List, ast.Tuple)):
            out.update(e.value for e in v.elts if isinstance(e, ast.Constant)
                       and isinstance(e.value, str))
    return out


def check(imports: list[ModelImport], versions: dict[str, str],
          index: str | None = None) -> list[str]:
    """One line per import the given library versions lack (empty: every one resolves)."""
    libraries = {name: _Library(wheel_sources.WheelSources(name, versions[name], index))
                 for name in {i.module.split(".")[0] for i in imports}}
    problems = []
    for i in imports:
        top = i.module.split(".")[0]
        if not libraries[top].has(i.module, i.name):
            problems.append(f"{i.where}: {top} {versions[top]} has no {i.module}.{i.name}")
    return problems


def locked(release: str) -> dict[str, str]:
    found = lock.locked_versions(pins.gpu_lock_path(release))
    return {name: found[name.replace("_", "-")] for name in ("vllm", *LIBRARIES)}


def check_release(release: str, index: str | None = None) -> list[str]:
    versions = locked(release)
    vllm = wheel_sources.WheelSources("vllm", versions["vllm"], index)
    return check(model_imports(vllm), versions, index)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonbuild.tools.model_imports")
    parser.add_argument("releases", nargs="*", metavar="RELEASE")
    parser.add_argument("--pip-index-url", metavar="URL")
    args = parser.parse_args(argv)
    try:
        index = wheel_sources.index_url(args.pip_index_url)
    except wheel_sources.IndexError_ as e:
        print(f"model_imports: {e}", file=sys.stderr)
        return 2
    status = 0
    for release in args.releases or [r for r, row in pins.ngc_releases().items() if "vllm" in row]:
        known = set(pins.ngc_release(release).get("unimportable_models", []))
        problems = check_release(release, index)
        new = [p for p in problems if _module_of(p) not in known]
        print(f"NGC {release}: " + ("every model module's import resolves" if not new
                                    else f"{len(new)} unresolved")
              + (f" (but {', '.join(sorted(known))}: unimportable_models)" if known else ""))
        for p in problems:
            print(("  known: " if _module_of(p) in known else "  ") + p)
        status |= bool(new)
    return status


def _module_of(problem: str) -> str:
    return problem.split(":")[0].rsplit("/", 1)[-1].removesuffix(".py")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
