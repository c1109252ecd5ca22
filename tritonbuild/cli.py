"""build.py's orchestrator: flags -> plan -> rendered files -> build directory -> engine."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import EngineError, TritonBuildError
from .hostenv import HostFacts, discover
from .pipeline.context import check_sources, write_build_dir
from .pipeline.engine import DockerCli, Engine
from .pipeline.flags import parse_flags
from .pipeline.render import render
from .pipeline.validate import make_plan
from .release import sbom
from .release.plan import ReleaseFacts, ReleasePlan, discover_release_facts, make_release_plan
from .release.publish import DockerSkopeo, Registry, publish

__all__ = ["main"]


def _say(message: str) -> None:
    print(f"build.py: {message}", file=sys.stderr, flush=True)


def _check_local_images(plan, engine: Engine) -> None:
    # Images named local/... are made on this machine (scripts/make_base_image.sh) and
    # cannot be pulled: without this check the build fails on a confusing pull error.
    for image in dict.fromkeys((plan.base_image.value, plan.inference_image.value)):
        if image.startswith("local/") and not engine.has_image(image):
            raise EngineError(f"the engine has no image {image}: scripts/make_base_image.sh "
                              f"{image} makes it")


class QaFailedError(TritonBuildError):
    exit_code = 3


def run_qa(image: str, suites: Sequence[str], out_dir: Path) -> int:
    """`python -m qa IMAGE --suites ... --out DIR` with the test environment's Python
    (pytest and the clients live there, not necessarily beside build.py's Jinja2)."""
    venv_python = Path(os.environ.get("TVB_VENV", "/nonexistent"), "bin", "python")
    python = str(venv_python) if venv_python.exists() else sys.executable
    return subprocess.call([python, "-m", "qa", image, "--suites", ",".join(suites),
                            "--out", str(out_dir)], cwd=Path(__file__).resolve().parent.parent)


def _qa_then_publish(image: str, release: ReleasePlan, root: Path, quiet: bool, *,
                     qa: Callable[[str, Sequence[str], Path], int], registry: Registry | None,
                     make_sbom: Callable[[str], dict]) -> None:
    """After the build, in this order: QA, then publishing only if QA passed."""
    say = (lambda m: None) if quiet else _say
    if release.qa_suites.value:
        out = root / "qa"
        _say(f"QA: {', '.join(release.qa_suites.value)} against {image}")
        if qa(image, release.qa_suites.value, out) != 0:
            raise QaFailedError(f"QA failed (summary: {out / 'summary.html'})"
                                + ("; nothing was pushed" if release.push.value else ""))
        _say(f"QA passed: {out / 'summary.html'}")
    if release.push.value is not None:
        say(f"reading the SBOM of {image}")
        done = publish(image, release.push.value, release.tags.value,
                       registry or DockerSkopeo(), root, say=say,
                       sbom=sbom.dumps(make_sbom(image)))
        _say(f"published {done.target.at(done.digest)} as {', '.join(done.tags)}")


def main(argv: Sequence[str] | None = None, *, host: HostFacts | None = None,
         engine: Engine | None = None, release_facts: ReleaseFacts | None = None,
         qa: Callable[[str, Sequence[str], Path], int] = run_qa,
         registry: Registry | None = None,
         make_sbom: Callable[[str], dict] = sbom.image_sbom) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        flags = parse_flags(argv)
        host = host or discover()
        plan = make_plan(flags, host)
        release = make_release_plan(flags, release_facts or discover_release_facts(host.repo_root),
                                    release=plan.container_version.value,
                                    flavor=plan.flavor.value)
        quiet = plan.progress.value == "quiet"
        for note in plan.notes:
            if not quiet:
                _say(note)
        rendered = render(plan)
        check_sources(rendered)
        engine = engine or DockerCli()
        root = plan.build_dir.value
        command = engine.command(plan, root / "Dockerfile", root / "context")
        if not plan.dryrun.value:
            engine.check()  # before writing anything
            _check_local_images(plan, engine)
        files = write_build_dir(plan, rendered, command.script())
        if plan.dryrun.value:
            for path in (files.dockerfile, files.build_script, files.plan_json):
                print(path)
            return 0
        if not quiet:
            _say(f"building {plan.tag.value} ({plan.flavor.value} image) with {files.build_script}")
        engine.run(command)
        if not quiet:
            _say(f"built {plan.tag.value}")
        (root / "release.json").write_text(release.to_json())
        _qa_then_publish(plan.tag.value, release, root, quiet, qa=qa,
                         registry=registry, make_sbom=make_sbom)
        return 0
    except TritonBuildError as e:
        _say(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        return 130
