"""The OpenAI frontend's wheel compiles its C callbacks (a required extension): the stage
that builds it must have the compiler and Python's headers, or the image build fails."""
import re

import pytest

from tritonbuild.pipeline.render import render


@pytest.mark.parametrize("gpu", [[], ["--enable-gpu"]], ids=["cpu", "gpu"])
def test_the_wheel_is_built_where_gcc_and_pythons_headers_are(plan_for, gpu):
    dockerfile = render(plan_for("--endpoint=openai", *gpu)).dockerfile
    assert "FROM builder AS frontend-wheel" in dockerfile
    builder = dockerfile.split(" AS builder\n", 1)[1].split("\nFROM ", 1)[0]
    packages = set(re.findall(r"^\s+([\w.+-]+) \\$", builder, re.M))
    assert "gcc" in packages, builder
    assert any(re.fullmatch(r"(libpython3\.\d+|python3)-dev", p) for p in packages), builder
