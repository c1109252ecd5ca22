"""build.py's orchestrator: flags -> plan -> rendered files -> build directory -> engine."""
from __future__ import annotations

import sys
from collections.abc import Sequence

from .context import check_sources, write_build_dir
from .engine import DockerCli, Engine
from .errors import EngineError, TritonBuildError
from .flags import parse_flags
from .hostenv import HostFacts, discover
from .render import render
from .validate import make_plan

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


def main(argv: Sequence[str] | None = None, *, host: HostFacts | None = None,
         engine: Engine | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        flags = parse_flags(argv)
        plan = make_plan(flags, host or discover())
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
        return 0
    except TritonBuildError as e:
        _say(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        return 130
