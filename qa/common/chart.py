"""The Helm chart in `helm/`, rendered by Helm's own engine (PyPI helm-python-sdk, which
binds Helm's Go code: no helm binary and no cluster needed).

    manifests = render(values_files=[FIXTURES / "gpu-tp.yaml"])
    deployment = find(manifests, "Deployment")

`render` merges values files in order, as `helm template -f A -f B` does, checks them
against the chart's values.schema.json, and returns every manifest (hooks included) as a
dict, in a stable order.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "helm"
RELEASE = "llm"
NAMESPACE = "serving"


class ChartError(RuntimeError):
    """Helm refused the values or a template failed; the message is Helm's."""


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_values(values_files=(), values: dict | None = None) -> dict:
    """The user-supplied values (not the chart's defaults), merged in order."""
    merged: dict = {}
    for path in values_files:
        merged = _deep_merge(merged, yaml.safe_load(Path(path).read_text()) or {})
    return _deep_merge(merged, values or {})


def render_text(values_files=(), values: dict | None = None, *, name: str = RELEASE,
                namespace: str = NAMESPACE) -> dict[str, str]:
    """Template path -> rendered text, as Helm renders it for `helm install`."""
    import helm_python

    user = load_values(values_files, values)
    chart = helm_python.Chart.load(str(CHART))
    try:
        # helm install checks the merged values against values.schema.json first.
        chart.validate_schema(chart.merge_values(user))
        return chart.render(user, name=name, namespace=namespace, is_install=True)
    except helm_python.HelmError as err:
        raise ChartError(str(err)) from err
    finally:
        chart.close()


def render(values_files=(), values: dict | None = None, **kw) -> list[dict]:
    """Every rendered manifest (NOTES.txt left out), ordered by kind and name."""
    docs = []
    for path, text in sorted(render_text(values_files, values, **kw).items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


def notes(values_files=(), values: dict | None = None, **kw) -> str:
    for path, text in render_text(values_files, values, **kw).items():
        if path.endswith("NOTES.txt"):
            return text
    return ""


def find(manifests: list[dict], kind: str, name: str | None = None) -> dict:
    found = [m for m in manifests if m["kind"] == kind
             and (name is None or m["metadata"]["name"] == name)]
    if len(found) != 1:
        raise LookupError(f"{len(found)} manifests of kind {kind}"
                          f"{' named ' + name if name else ''}")
    return found[0]


def hooks(manifests: list[dict], hook: str = "test") -> list[dict]:
    return [m for m in manifests
            if (m["metadata"].get("annotations") or {}).get("helm.sh/hook") == hook]


def required_models(probe: dict) -> list[str]:
    """The models a rendered startup or readiness probe requires: the `model`s of its
    httpGet's query (the frontend's /health/ready?model=NAME&...)."""
    query = urllib.parse.urlsplit(probe["httpGet"]["path"]).query
    return urllib.parse.parse_qs(query).get("model", [])


# ---------------------------------------------------------------- values reference
def _type_of(schema: dict) -> str:
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type_of(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array" and "items" in schema:
        inner = schema["items"].get("type", "any")
        return f"list of {inner}s"
    return kind


def _default(defaults, path: list[str]):
    for key in path:
        if not isinstance(defaults, dict) or key not in defaults:
            return None
        defaults = defaults[key]
    return defaults


def _rows(schema: dict, defaults: dict, path: list[str]) -> list[str]:
    rows = []
    for key, sub in schema.get("properties", {}).items():
        here = [*path, key]
        nested = sub.get("type") == "object" and sub.get("properties")
        items = sub.get("items", {}) if sub.get("type") == "array" else {}
        if not nested:
            default = _default(defaults, here)
            shown = "" if default is None else f"`{json.dumps(default)}`"
            rows.append(f"| `{'.'.join(here)}` | {_type_of(sub)} | {shown} | "
                        f"{sub.get('description', '')} |")
        if nested:
            rows += _rows(sub, defaults, here)
        elif items.get("properties"):
            rows += _rows(items, {}, [*here[:-1], f"{key}[]"])
    return rows


def values_reference() -> str:
    """The README's values table, from values.schema.json and the chart's defaults."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    head = ["| key | type | default | description |", "|---|---|---|---|"]
    return "\n".join(head + _rows(schema, defaults, [])) + "\n"
