"""build.py's orchestrator: flags -> plan -> rendered files -> build directory -> engine."""
from __future__ import annotations

import sys
from typing import Sequence

from .context import check_sources, write_build_dir
from .engine import DockerCli, Engine
from .errors import TritonBuildError
from .flags import parse_flags
from .hostenv import HostFacts, discover
from .render import render
from .validate import make_plan

__all__ = ["main"]


def _say(message: str) -> None:
    print(f"build.py: {message}", file=sys.stderr, flush=True)


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
