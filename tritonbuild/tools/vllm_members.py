"""The members of vLLM's classes that the backend touches, found in the backend's code.

An AST walk of backends/vllm follows vLLM objects from where they enter: the classes the
backend imports from vllm (their constructors, class attributes and methods, with the
keyword arguments given), and the objects vLLM hands the backend, by the parameter or
attribute that receives them (ENTRY).  From there the walk follows vLLM's own
annotations (`outputs: list[CompletionOutput]`, a method's `AsyncGenerator[RequestOutput]`)
through attributes, subscripts, loops and comprehensions, so that any new use of a member
is checked without a list to keep up to date.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENTRY", "MemberUse", "member_uses", "check_members"]

# Where vLLM objects reach the backend other than by import: a parameter or self-attribute
# of this name holds an instance of that class.
ENTRY: dict[str, tuple[str, str]] = {
    "request_output": ("vllm.outputs", "RequestOutput"),
    "pooling_output": ("vllm.outputs", "PoolingRequestOutput"),
    "scheduler_stats": ("vllm.v1.metrics.stats", "SchedulerStats"),
    "iteration_stats": ("vllm.v1.metrics.stats", "IterationStats"),
    "self.engine": ("vllm.v1.engine.async_llm", "AsyncLLM"),
}


@dataclass(frozen=True)
class MemberUse:
    module: str
    cls: str
    member: str           # "" for the constructor
    keywords: tuple[str, ...]
    positional: int
    where: str


@dataclass(frozen=True)
class _T:
    """A vLLM type as the walk knows it: an instance of (module, cls), the class itself,
    or a container of one."""
    module: str
    cls: str
    kind: str = "instance"   # "instance" | "class" | "list" | "dict" (values of that type)


class _Classes:
    """vLLM's classes, from its sources: members, signatures, annotations, bases."""

    def __init__(self, sources) -> None:
        self.sources = sources
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            member = self.sources.module_file(module)
            self._trees[module] = None if member is None else ast.parse(self.sources.read(member))
        return self._trees[module]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        tree = self.tree(module)
        if tree is None or depth > 5:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, name
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    if (a.asname or a.name) == name:
                        base = node.module if node.level == 0 else _relative(module, node)
                        return self.resolve(base, a.name, depth + 1)
        return None

    def classdef(self, module: str, cls: str) -> ast.ClassDef | None:
        tree = self.tree(module)
        for node in (tree.body if tree else []):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                return node
        return None

    def lookup(self, module: str, cls: str, member: str, depth: int = 0):
        """(module, the node that defines member: a function, an annotation or None for a
        plain attribute), or None where neither the class nor its bases have it."""
        node = self.classdef(module, cls)
        if node is None or depth > 6:
            return None
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == member:
                return module, item
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                    and item.target.id == member:
                return module, item.annotation
            if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == member
                                                    for t in item.targets):
                return module, None
        init = next((i for i in node.body if isinstance(i, ast.FunctionDef)
                     and i.name == "__init__"), None)
        if init is not None:
            for sub in ast.walk(init):
                targets = (sub.targets if isinstance(sub, ast.Assign) else
                           [sub.target] if isinstance(sub, ast.AnnAssign) else [])
                for t in targets:
                    if isinstance(t, ast.Attribute) and t.attr == member \
                            and isinstance(t.value, ast.Name) and t.value.id == "self":
                        if isinstance(sub, ast.AnnAssign):
                            return module, sub.annotation
                        arg = next((a for a in init.args.args + init.args.kwonlyargs
                                    if isinstance(sub.value, ast.Name)
                                    and a.arg == sub.value.id), None)
                        return module, arg.annotation if arg is not None else None
        for base in node.bases:
            name = base.value.id if isinstance(base, ast.Subscript) and \
                isinstance(base.value, ast.Name) else getattr(base, "id", None)
            found = self.resolve(module, name) if name else None
            if found:
                hit = self.lookup(*found, member, depth + 1)
                if hit is not None:
                    return hit
            elif self._foreign(module, base):
                # A base from outside vLLM (argparse.ArgumentParser under vLLM's
                # FlexibleArgumentParser): its members are not vLLM's to check.
                return module, None
        return None

    def _foreign(self, module: str, base: ast.expr) -> bool:
        """Whether a class's base comes from a module outside vLLM (stdlib, a dependency)."""
        root = base
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if not isinstance(root, ast.Name):
            return False
        for node in ast.walk(self.tree(module)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and any((a.asname or a.name) == root.id for a in node.names):
                return node.module.split(".")[0] != "vllm"
            if isinstance(node, ast.Import) and any((a.asname or a.name) == root.id
                                                    for a in node.names):
                return root.id.split(".")[0] != "vllm"
        return False

    def fields(self, module: str, cls: str) -> list[str] | None:
        """What the constructor takes: __init__'s arguments, else the annotated fields
        (dataclasses, msgspec structs), bases first; None = takes anything."""
        hit = self.lookup(module, cls, "__init__")
        if hit is not None and isinstance(hit[1], ast.FunctionDef):
            return _arguments(hit[1])
        node = self.classdef(module, cls)
        if node is None:
            return None
        out: list[str] = []
        for base in node.bases:
            found = self.resolve(module, base.id) if isinstance(base, ast.Name) else None
            out += (self.fields(*found) or []) if found else []
        out += [i.target.id for i in node.body if isinstance(i, ast.AnnAssign)
                and isinstance(i.target, ast.Name)]
        return out

    def type_of(self, module: str, annotation: ast.expr | None) -> _T | None:
        """The vLLM type an annotation names: X, list[X], X | None, Optional[X],
        AsyncGenerator[X, ...] (the last three as X, or a list of X for iteration)."""
        if annotation is None:
            return None
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.BinOp):
            return self.type_of(module, annotation.left) or self.type_of(module, annotation.right)
        if isinstance(annotation, ast.Subscript):
            outer = ast.unparse(annotation.value).split(".")[-1]
            inner = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) \
                else annotation.slice
            found = self.type_of(module, inner)
            if found is None:
                return None
            if outer in ("list", "List", "Sequence", "AsyncGenerator", "AsyncIterator",
                         "Iterator", "Iterable", "Generator"):
                return _T(found.module, found.cls, "list")
            return found if outer in ("Optional", "Union") else None
        if isinstance(annotation, ast.Name):
            found = self.resolve(module, annotation.id)
            return _T(*found) if found else None
        return None


def _relative(module: str, node: ast.ImportFrom) -> str:
    parts = module.split(".")
    return ".".join(parts[:len(parts) - node.level] + ([node.module] if node.module else []))


def _arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str] | None:
    if fn.args.kwarg is not None:
        return None
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            if a.arg not in ("self", "cls")]


class _Walk(ast.NodeVisitor):
    """One backend file: types of names, uses of members."""

    def __init__(self, classes: _Classes, where: str) -> None:
        self.classes, self.where = classes, where
        self.env: dict[str, _T] = {}
        self.uses: list[MemberUse] = []

    def type_of(self, node: ast.expr) -> _T | None:
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Attribute):
            key = ast.unparse(node)
            if key in ENTRY:
                return _T(*ENTRY[key])
            owner = self.type_of(node.value)
            if owner is None or owner.kind in ("list", "dict"):
                return None
            self._use(owner, node.attr, node)
            hit = self.classes.lookup(owner.module, owner.cls, node.attr)
            if hit is None or isinstance(hit[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            if owner.kind == "class" and hit[1] is None:
                return _T(owner.module, owner.cls)     # an enum's member
            return self.classes.type_of(hit[0], hit[1])
        if isinstance(node, ast.Subscript):
            self.type_of(node.slice)
            seq = self.type_of(node.value)
            return _T(seq.module, seq.cls) if seq and seq.kind in ("list", "dict") else None
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.BoolOp):
            return next(filter(None, (self.type_of(v) for v in node.values)), None)
        if isinstance(node, ast.Await):
            return self.type_of(node.value)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension(node)
        for child in ast.iter_child_nodes(node):  # any other expression: look inside
            if isinstance(child, ast.expr):
                self.type_of(child)
        return None

    def _call(self, node: ast.Call) -> _T | None:
        for a in node.args + [k.value for k in node.keywords]:
            self.type_of(a)
        keywords = tuple(k.arg for k in node.keywords if k.arg)
        positional = sum(not isinstance(a, ast.Starred) for a in node.args)
        if isinstance(node.func, ast.Name) and node.func.id in self.env \
                and self.env[node.func.id].kind == "class":
            t = self.env[node.func.id]
            self.uses.append(MemberUse(t.module, t.cls, "", keywords, positional, self._at(node)))
            return _T(t.module, t.cls)
        if isinstance(node.func, ast.Attribute):
            owner = self.type_of(node.func.value)
            if owner is not None and owner.kind == "dict":  # a dict the backend made
                return {"get": _T(owner.module, owner.cls),
                        "values": _T(owner.module, owner.cls, "list")}.get(node.func.attr)
            if owner is not None and owner.kind == "instance" or \
                    owner is not None and owner.kind == "class":
                self.uses.append(MemberUse(owner.module, owner.cls, node.func.attr, keywords,
                                           positional, self._at(node)))
                hit = self.classes.lookup(owner.module, owner.cls, node.func.attr)
                if hit and isinstance(hit[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return self.classes.type_of(hit[0], hit[1].returns)
        else:
            self.type_of(node.func)
        return None

    def _use(self, owner: _T, member: str, node: ast.AST) -> None:
        if member.startswith("__"):
            return  # set by a metaclass (msgspec's __struct_fields__), not in the source
        self.uses.append(MemberUse(owner.module, owner.cls, member, (), 0, self._at(node)))

    def _at(self, node: ast.AST) -> str:
        return f"{self.where}:{getattr(node, 'lineno', 0)}"

    def _bind(self, target: ast.expr, t: _T | None) -> None:
        if isinstance(target, ast.Name):
            if t is not None:
                self.env[target.id] = t
            else:
                self.env.pop(target.id, None)

    # -- statements ---------------------------------------------------------------------
    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module and node.module.split(".")[0] == "vllm":
            for a in node.names:
                found = self.classes.resolve(node.module, a.name)
                if found:
                    self.env[a.asname or a.name] = _T(*found, "class")

    def visit_FunctionDef(self, node) -> None:
        saved = dict(self.env)
        for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            if a.arg in ENTRY:
                self.env[a.arg] = _T(*ENTRY[a.arg])
        for stmt in node.body:
            self.visit(stmt)
        self.env = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        t = self.type_of(node.value)
        for target in node.targets:
            self._bind(target, t)

    def visit_For(self, node) -> None:
        seq = self.type_of(node.iter)
        self._bind(node.target, _T(seq.module, seq.cls) if seq and seq.kind == "list" else None)
        for stmt in node.body + node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def _comprehension(self, node) -> _T | None:
        """The comprehension's type: a list or dict of a vLLM type, where its element is."""
        saved = dict(self.env)
        for gen in node.generators:
            seq = self.type_of(gen.iter)
            self._bind(gen.target, _T(seq.module, seq.cls) if seq and seq.kind == "list"
                       else None)
            for cond in gen.ifs:
                self.type_of(cond)
        found = {part: self.type_of(getattr(node, part))
                 for part in ("elt", "key", "value") if hasattr(node, part)}
        self.env = saved
        element = found.get("value") or found.get("elt")
        if element is None or element.kind != "instance":
            return None
        return _T(element.module, element.cls, "dict" if "value" in found else "list")

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.expr):
            self.type_of(node)
        else:
            super().visit(node)


def member_uses(sources, backend: Path) -> list[MemberUse]:
    classes = _Classes(sources)
    uses: list[MemberUse] = []
    for path in sorted(backend.rglob("*.py")):
        walk = _Walk(classes, str(path.relative_to(backend.parent)))
        walk.visit(ast.parse(path.read_text(), str(path)))
        uses += walk.uses
    def order(u: MemberUse):
        path, _, line = u.where.rpartition(":")
        return path, int(line), u.cls, u.member
    return sorted(set(uses), key=order)


def check_members(sources, backend: Path) -> list[str]:
    """One line per member or argument the backend uses that this vLLM lacks."""
    classes = _Classes(sources)
    problems = []
    for u in member_uses(sources, backend):
        name = f"{u.module}.{u.cls}" + (f".{u.member}" if u.member else "")
        if u.member and classes.lookup(u.module, u.cls, u.member) is None:
            problems.append(f"{u.where}: {name} does not exist")
            continue
        if not (u.keywords or u.positional):
            continue
        if u.member:
            hit = classes.lookup(u.module, u.cls, u.member)
            takes = _arguments(hit[1]) if hit and isinstance(
                hit[1], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        else:
            takes = classes.fields(u.module, u.cls)
        if takes is None:
            continue
        problems += [f"{u.where}: {name} takes no argument {k}" for k in u.keywords
                     if k not in takes]
        if u.positional > len(takes):
            problems.append(f"{u.where}: {name} takes {len(takes)} arguments, given "
                            f"{u.positional}")
    return problems
