"""Where tritonbuild/tools/wheel_sources.py reads wheels from: the user's index, never one
of ours."""
import subprocess
import sys

import pytest

from tritonbuild.tools import wheel_sources


@pytest.fixture
def no_index(monkeypatch, tmp_path):
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    # pip reads this file in place of the user's and site configuration.
    conf = tmp_path / "pip.conf"
    conf.write_text("")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    return conf


def test_the_flag_comes_first(no_index, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.invalid/simple")
    assert wheel_sources.index_url("https://flag.invalid/simple") == "https://flag.invalid/simple"


def test_then_pip_index_url(no_index, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.invalid/simple")
    assert wheel_sources.index_url() == "https://env.invalid/simple"


def test_then_pips_configuration(no_index):
    no_index.write_text("[global]\nindex-url = https://conf.invalid/simple\n")
    assert wheel_sources.index_url() == "https://conf.invalid/simple"


def test_then_the_index_pip_itself_uses(no_index):
    pips = subprocess.run([sys.executable, "-c", "from pip._internal.models.index import PyPI;"
                           "print(PyPI.simple_url)"], capture_output=True, text=True, check=True)
    assert wheel_sources.index_url() == pips.stdout.strip()


def test_without_pip_and_configuration_the_error_says_what_to_set(no_index, monkeypatch):
    monkeypatch.setitem(sys.modules, "pip._internal.models.index", None)
    with pytest.raises(wheel_sources.IndexError_) as e:
        wheel_sources.index_url()
    assert str(e.value) == ("no package index: pass --pip-index-url URL, set PIP_INDEX_URL, or "
                            "set one in pip's configuration "
                            "(pip config set global.index-url URL)")


def test_html_index_pages_are_read():
    parser = wheel_sources._Links()
    parser.feed('<a href="../../f/x-1.0-py3-none-any.whl#sha256=ab">x-1.0-py3-none-any.whl</a>')
    assert parser.links == [("x-1.0-py3-none-any.whl", "../../f/x-1.0-py3-none-any.whl#sha256=ab")]
