"""The frontend's packages import downwards only: each unit (a subpackage, or a module at
the package root) has a floor, and imports units on its own floor or below.

    6  start-up           __init__.py __main__.py cli.py app.py
    5  API surfaces       chat/ completions/ responses_api/ tokenization/ embeddings/
                          models/ health/   (none imports another)
    4  shared chat layer  conversation/
    3  generation         generation/
    2  models, shutdown   served_models/ shutdown/
    1  HTTP plumbing      web/
    0  leaves             triton/ text/ tool_parsers/ reasoning/ config.py

Why: what two API surfaces share sits below both, so a change to one surface cannot
reach another, and a lower layer can be read and tested without what is above it.  The
table, with a reason per floor, is LAYERS in scripts/import_graph.py, which reads the
imports (with `ast`, lazy ones included) and prints the graph; these tests fail on
anything it would report.  A new subpackage or root module needs a floor there.
"""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph",
                                                  REPO / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


import_graph = _import_graph()
GRAPH = import_graph.read_graph(REPO / "frontends" / "openai" / "src")


def test_every_unit_has_a_floor():
    assert import_graph.unplaced(GRAPH) == []


def test_no_unit_imports_one_on_a_higher_floor():
    assert [str(arrow) for arrow in import_graph.upward(GRAPH)] == []


def test_no_endpoint_package_imports_another():
    assert [str(arrow) for arrow in import_graph.between_endpoints(GRAPH)] == []


def test_no_units_import_each_other():
    assert import_graph.cycles(GRAPH) == []


def test_the_reader_sees_relative_lazy_and_package_imports(tmp_path):
    """What the checks rest on: `from .. import x`, an import inside a function, and an
    arrow up or between endpoints are each found."""
    package = tmp_path / import_graph.PACKAGE
    for folder in ("chat", "completions", "web"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("def main():\n    from .chat import serving\n")
    (package / "chat" / "serving.py").write_text("from .. import cli\nfrom ..web import sse\n")
    (package / "web" / "sse.py").write_text("from ..completions import protocol\n")
    (package / "completions" / "protocol.py").write_text("from ..chat.serving import X\n")
    graph = import_graph.read_graph(tmp_path)
    assert {unit: sorted(targets) for unit, targets in graph.edges.items()} == {
        "cli.py": ["chat/"], "chat/": ["cli.py", "web/"], "web/": ["completions/"],
        "completions/": ["chat/"]}
    assert [(a.source, a.target) for a in import_graph.upward(graph)] == [
        ("chat/", "cli.py"), ("web/", "completions/")]
    assert [(a.source, a.target) for a in import_graph.between_endpoints(graph)] == [
        ("completions/", "chat/")]
    assert import_graph.cycles(graph) == [["chat/", "cli.py", "completions/", "web/"]]
