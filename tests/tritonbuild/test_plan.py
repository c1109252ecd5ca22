import dataclasses
import json

import pytest

from tritonbuild.plan import SOURCES, BuildPlan, Sourced


def test_plan_is_immutable(plan_for):
    plan = plan_for()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.tag = Sourced("x", "flag")  # type: ignore[misc]


def test_json_has_every_value_with_its_source(plan_for, tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("")
    plan = plan_for("--enable-all", "--build-secret", "netrc", str(netrc))
    data = json.loads(plan.to_json())
    sourced = [f.name for f in dataclasses.fields(BuildPlan)
               if isinstance(getattr(plan, f.name), Sourced)]
    assert set(sourced) <= set(data)
    for name in sourced:
        assert data[name]["source"] in SOURCES, name
    assert data["flavor"] == {"value": "gpu", "source": "implied",
                              "reason": "--enable-all implies --enable-gpu"}
    assert {"id": "netrc", "src": str(netrc)} in data["secrets"]["value"]
    assert data["pins"]["value"]["vllm"]
    assert "--enable-all implies --enable-gpu" in data["notes"]


def test_unknown_source_is_a_bug():
    with pytest.raises(ValueError):
        Sourced(1, "guess")
