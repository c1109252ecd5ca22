
import pytest

from tritonbuild.errors import SourceError
from tritonbuild.pipeline.components import ContextItem
from tritonbuild.pipeline.context import check_sources, write_build_dir
from tritonbuild.pipeline.render import Rendered, render


def test_stages_only_what_the_image_needs(plan_for, tmp_path, wheelhouse):
    plan = plan_for("--backend=vllm", "--endpoint=openai", f"--build-dir={tmp_path}")
    files = write_build_dir(plan, render(plan), "#!/bin/sh\n")
    ctx = files.context
    top = sorted(p.name for p in ctx.iterdir())
    assert top == ["backends", "frontends", "image", "model_repository", "patches",
                   "preload", "sample_repository", "wheelhouse"]
    assert (ctx / "image" / "entrypoint.sh").stat().st_mode & 0o111
    assert not list(ctx.rglob("__pycache__"))
    wheel = next(wheelhouse.iterdir())
    assert (ctx / "wheelhouse" / wheel.name).stat().st_ino == wheel.stat().st_ino  # hard link
    assert (tmp_path / ".gitignore").read_text() == "*\n"
    assert files.build_script.stat().st_mode & 0o111


def test_restaging_drops_stale_files(plan_for, tmp_path):
    plan = plan_for(f"--build-dir={tmp_path}")
    (tmp_path / "context" / "old").mkdir(parents=True)
    write_build_dir(plan, render(plan), "")
    assert not (tmp_path / "context" / "old").exists()


def test_missing_source_fails_before_writing(tmp_path):
    rendered = Rendered("FROM x\n", {}, (ContextItem("a", source=tmp_path / "missing"),))
    with pytest.raises(SourceError, match="missing"):
        check_sources(rendered)
