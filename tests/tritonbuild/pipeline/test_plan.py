import dataclasses
import json

import pytest

from tritonbuild import pins
from tritonbuild.pipeline.flags import make_parser
from tritonbuild.pipeline.plan import FEATURES, SOURCES, BuildPlan, Sourced


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
    release = pins.get("triton.gpu_upstream_container_version")
    assert data["pins"]["value"]["vllm"] == pins.ngc_release(release)["vllm"]
    assert "--enable-all implies --enable-gpu" in data["notes"]


def test_unknown_source_is_a_bug():
    with pytest.raises(ValueError):
        Sourced(1, "guess")


def test_features_agree_with_the_plan_and_the_flags():
    # The plan's feature fields are FEATURES, in its order, right after the filesystems.
    names = [f.name for f in dataclasses.fields(BuildPlan)]
    start = names.index("filesystems") + 1
    assert names[start:start + len(FEATURES)] == [f.field for f in FEATURES]
    assert names[start + len(FEATURES)] == "upstream_container_version"
    options = {o for a in make_parser()._actions for o in a.option_strings}
    assert {f.flag for f in FEATURES} <= options
    for f in FEATURES:
        assert set(f.needs) <= {g.name for g in FEATURES}, f.name


def test_features_lists_those_switched_on(plan_for):
    assert plan_for().features() == []
    assert plan_for("--enable-metrics", "--enable-cpu-metrics", "--enable-logging").features() == [
        "logging", "metrics", "cpu-metrics"]
