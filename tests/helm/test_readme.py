"""helm/README.md: its values table is the schema's, and its helm commands work as written.

No helm binary or cluster is available: each `helm install | upgrade --install |
template` line is parsed (its -f and --set with Helm's own parser) and rendered by Helm's
engine, as `helm install` would before sending the manifests; `helm lint` lines run Helm's
linter; `helm test RELEASE` lines check that the release they follow has test hooks
(qa/L0_helm runs those hooks against the real image).
"""

from __future__ import annotations

import os
import re
import shlex

import pytest

from qa.common import chart

README = chart.CHART / "README.md"
START, END = "<!-- values:start -->\n", "<!-- values:end -->"


def test_values_table_matches_the_schema():
    text = README.read_text()
    before, rest = text.split(START)
    _, after = rest.split(END)
    expected = before + START + chart.values_reference() + END + after
    if os.environ.get("TVB_UPDATE_GOLDEN") == "1":
        README.write_text(expected)
    assert text == expected, "helm/README.md's values table differs from values.schema.json: " \
        "TVB_UPDATE_GOLDEN=1 scripts/run_tests.sh tests/helm"


def test_every_value_is_in_the_table():
    table = chart.values_reference()
    for key in ("image.repository", "models[].fetch.credentialsSecret", "keda.enabled",
                "probes.startup.budgetSeconds", "multiNode.size"):
        assert f"| `{key}` |" in table


def helm_commands() -> list[list[str]]:
    """Every `helm ...` line of the README's sh blocks, split as a shell would."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.DOTALL)
    lines = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("helm ")]


def _values(args: list[str]) -> tuple[dict, list[str], str]:
    """(--set values, -f files, namespace) of a helm command's flags."""
    import helm_python

    sets, files, namespace = {}, [], chart.NAMESPACE
    it = iter(args)
    for arg in it:
        if arg in ("-f", "--values"):
            files.append(chart.REPO_ROOT / next(it))
        elif arg == "--set":
            sets = chart._deep_merge(sets, helm_python.parse_set_string(next(it)))
        elif arg in ("-n", "--namespace"):
            namespace = next(it)
        elif arg not in ("--install", "--wait", "--create-namespace"):
            raise AssertionError(f"the README test does not know {arg!r}: teach it")
    return sets, files, namespace


def test_readme_shows_helm_commands():
    verbs = {c[1] for c in helm_commands()}
    assert {"install", "upgrade", "test", "lint"} <= verbs


def test_readme_helm_commands_work_as_written():
    import helm_python
    import kubernetes_validate

    released = {}
    for command in helm_commands():
        verb, rest = command[1], command[2:]
        if verb in ("install", "template", "upgrade"):
            if verb == "upgrade":
                assert "--install" in rest, command
                rest = [a for a in rest if a != "--install"]
            name, chart_dir, *flags = rest
            assert (chart.REPO_ROOT / chart_dir).resolve() == chart.CHART, command
            sets, files, namespace = _values(flags)
            manifests = chart.render(files, sets, name=name, namespace=namespace)
            for m in manifests:
                if m["kind"] not in ("ScaledObject", "ServiceMonitor", "PodMonitor", "PrometheusRule",
                                     "HTTPRoute", "LeaderWorkerSet"):
                    kubernetes_validate.validate(m, "1.37.0", strict=True)
            released[name] = manifests
        elif verb == "test":
            name = command[2]
            assert name in released, f"`helm test {name}` before any install of {name}"
            assert len(chart.hooks(released[name])) == 3
        elif verb == "lint":
            assert (chart.REPO_ROOT / command[2]).resolve() == chart.CHART
            report = helm_python.lint(str(chart.CHART), strict="--strict" in command)
            assert not report["errors"] and all(m["severity"] < 2 for m in report["messages"])
        else:
            pytest.fail(f"the README shows `helm {verb}`, which this test cannot check")
