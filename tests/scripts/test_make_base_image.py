"""scripts/make_base_image.sh takes its Debian mirror from apt's sources, never a guess."""

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_base_image.sh"


def run(tmp_path, sources_text):
    sources = tmp_path / "debian.sources"
    sources.write_text(sources_text)
    env = {**os.environ, "TVB_APT_SOURCES": str(sources),
           # No engine answers here: the image is never found, so the mirror is looked up.
           "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    env.pop("TVB_DEBIAN_MIRROR", None)
    return subprocess.run(["bash", str(SCRIPT), "local/never-made:test"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_no_mirror_in_apt_sources_is_a_clear_error(tmp_path):
    result = run(tmp_path, "Types: deb\nURIs: http://security.example/debian-security\n")
    assert result.returncode == 1
    assert "no Debian mirror in apt's sources" in result.stderr
    assert "TVB_DEBIAN_MIRROR" in result.stderr
    assert "make_base_image: debootstrap" not in result.stderr  # stopped before fetching
