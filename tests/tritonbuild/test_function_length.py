"""No function in tritonbuild grows past a screenful: long ones get split by concern."""
import ast
from pathlib import Path

import tritonbuild

MAX_LINES = 60
PACKAGE = Path(tritonbuild.__file__).parent


def long_functions(source: str, name: str) -> list[str]:
    tree = ast.parse(source, name)
    return [f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_LINES]


def test_no_function_is_longer_than_the_limit():
    found = [f for path in sorted(PACKAGE.rglob("*.py"))
             for f in long_functions(path.read_text(), str(path.relative_to(PACKAGE.parent)))]
    assert found == [], "split these into smaller functions:\n" + "\n".join(found)


def test_the_check_finds_a_long_function():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    assert long_functions(f"def f():\n{body}", "m.py") == [f"m.py:1 f ({MAX_LINES + 1} lines)"]
    assert long_functions(f"def f():\n{body[:-len('    x59 = 59')-1]}", "m.py") == []
