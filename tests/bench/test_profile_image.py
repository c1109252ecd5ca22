"""The CPU profile's arithmetic: what counts as serving, and ratios taken within a round."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import profile_image as profile  # noqa: E402

STUB, TRITON, FRONTEND = "backend stub (model.py)", "tritonserver", "frontend (triton-openai)"
API, CORE = "vLLM API server", "engine core (vLLM)"


def test_serving_leaves_the_engine_and_the_proxy_out():
    figures = profile.serving_figures({STUB: 200.0, TRITON: 100.0, FRONTEND: 80.0,
                                       CORE: 500.0, "vLLM worker": 900.0, "docker-proxy": 40.0})
    assert figures == {"serving_us": 380.0, "busiest": STUB, "busiest_us": 200.0}


def _run(target, r, us, tokens_per_s, ttft):
    return {"round": r, "target": target, "tokens_per_s": tokens_per_s, "ttft_p50_ms": ttft,
            "tpot_p50_ms": 1.0, "cpu_us_per_token": us, **profile.serving_figures(us)}


def test_ratios_are_taken_within_each_round():
    runs = [_run("openai-chat", 1, {STUB: 300.0, TRITON: 100.0, CORE: 999.0}, 1000.0, 30.0),
            _run("vllm-chat", 1, {API: 100.0, CORE: 50.0}, 2000.0, 10.0),
            # A slower host in round 2 slows both: the ratio stays.
            _run("vllm-chat", 2, {API: 200.0}, 1000.0, 20.0),
            _run("openai-chat", 2, {STUB: 600.0, TRITON: 200.0}, 500.0, 60.0)]
    summary = profile.summarize(runs)
    ours = summary["openai-chat"]
    assert ours["vs_vllm-chat"]["serving_us"] == {"median": 4.0, "min": 4.0, "max": 4.0}
    assert ours["vs_vllm-chat"]["busiest_us"] == {"median": 3.0, "min": 3.0, "max": 3.0}
    assert ours["vs_vllm-chat"]["tokens_per_s"]["median"] == 0.5
    assert ours["vs_vllm-chat"]["ttft_p50_ms"]["median"] == 3.0
    assert ours["processes"][STUB] == {"median": 450.0, "min": 300.0, "max": 600.0}
    assert ours["busiest"] == STUB
    assert "vs_vllm-chat" not in summary["vllm-chat"]
    text = profile.cpu_table({"summary": summary, "concurrency": 16, "output_tokens": 64,
                              "rounds": 2, "nproc": 2, "runs": []})
    assert "| serving CPU/token | 4.00 (4.00-4.00) |" in text
    assert f"| {CORE} (not counted) |" in text


def _readme_commands() -> list[list[str]]:
    import re
    import shlex
    repo = Path(__file__).resolve().parents[2]
    found = []
    for readme in (repo / "README.md", repo / "backends" / "vllm" / "README.md"):
        text = readme.read_text().replace("\\\n", " ")
        for line in re.findall(r"^.*bench/profile_image\.py .*$", text, re.MULTILINE):
            words = shlex.split(line.split("#")[0])
            found.append(words[words.index("bench/profile_image.py") + 1:])
    return found


def test_the_readmes_profile_commands_take_these_flags():
    commands = _readme_commands()
    assert commands
    for argv in commands:
        args = profile.parser().parse_args(argv)  # exits on a flag the script lacks
        assert args.image


def test_a_before_image_runs_our_server_from_it_under_targets_of_its_own():
    args = profile.parser().parse_args(["--image", "new", "--before-image", "old",
                                        "--ours-docker-arg=-e", "--ours-docker-arg=X=1"])
    assert profile.container_of(args, "before") == ("old", "ours")
    assert profile.container_of(args, "ours") == ("new", "ours")
    assert profile.container_of(args, "vllm") == ("new", "vllm")
    # Our server's extra arguments go to both of ours, never to vLLM's.
    assert profile.docker_args_of(args, "before") == ["-e", "X=1"]
    assert profile.docker_args_of(args, "vllm") == []
    runs = [_run("before-openai-chat", 1, {STUB: 300.0}, 1000.0, 30.0),
            _run("openai-chat", 1, {STUB: 150.0}, 1000.0, 30.0),
            _run("vllm-chat", 1, {API: 100.0}, 1000.0, 30.0)]
    summary = profile.summarize(runs)
    assert summary["before-openai-chat"]["vs_vllm-chat"]["serving_us"]["median"] == 3.0
    assert summary["openai-chat"]["vs_vllm-chat"]["serving_us"]["median"] == 1.5


def test_the_frontend_with_triton_in_its_process_is_told_from_tritonserver():
    # Its command line names the repository under /opt/tritonserver.
    assert profile.role_of("/opt/venv/bin/python /opt/venv/bin/triton-openai "
                           "--model-repository /opt/tritonserver/model_repository"
                           ) == "frontend (triton-openai)"
    assert profile.role_of("tritonserver --model-repository=/opt/tritonserver/"
                           "model_repository") == "tritonserver"
    assert [target for kind, target, _, _ in profile.PLAN if kind == "inprocess"] == [
        "inprocess-chat"]


def test_vllm_args_reach_vllms_server_alone():
    args = profile.parser().parse_args(["--image", "i", "--vllm-arg=--stream-interval 13"])
    assert profile.vllm_args_of(args, "vllm") == ["--stream-interval", "13"]
    assert profile.vllm_args_of(args, "ours") == [] == profile.vllm_args_of(args, "before")
