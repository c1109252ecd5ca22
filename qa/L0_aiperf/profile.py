"""One `aiperf profile` run: the command line, and what its JSON export says.

aiperf (PyPI `aiperf`, its own venv: $TVB_AIPERF, see scripts/setup_host.sh) writes
`profile_export_aiperf.json` into its artifact folder: one object per metric
(`{"unit": "ms", "avg": ..., "p50": ..., "p99": ...}`) beside `error_summary`,
`is_complete` and `was_cancelled`.  Its exit status is 0 even when requests failed, so
`problems()` reads the export for them.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

EXPORT_FILE = "profile_export_aiperf.json"
REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements" / "host-aiperf.txt"


def pinned_version(requirements: Path = REQUIREMENTS) -> str:
    """The aiperf release setup_host.sh installs: the file's `aiperf==X` line.  Exact on
    purpose: the venv is keyed on the file, so a looser line would never move."""
    for line in requirements.read_text().splitlines():
        found = re.fullmatch(r"aiperf==(\S+)", line.split("#")[0].strip())
        if found:
            return found.group(1)
    raise ValueError(f"{requirements} pins no aiperf==VERSION")


@dataclass(frozen=True)
class Profile:
    """A short, fixed load: synthetic prompts of exactly `input_tokens` tokens (by the
    model's own tokenizer), each answered with exactly `output_tokens` tokens."""
    model: str
    url: str                # the frontend's base URL, without /v1
    tokenizer: Path         # the model's folder
    input_tokens: int = 128
    output_tokens: int = 128
    requests: int = 128  # about 40 s at 4 streams on 2 cores
    concurrency: int = 4
    warmup_requests: int = 4
    seed: int = 0

    def argv(self, aiperf: str, artifacts: Path) -> list[str]:
        return [
            aiperf, "profile",
            "--model", self.model, "--url", self.url,
            "--endpoint-type", "chat", "--streaming",
            "--tokenizer", str(self.tokenizer),
            "--synthetic-input-tokens-mean", str(self.input_tokens),
            "--synthetic-input-tokens-stddev", "0",
            "--output-tokens-mean", str(self.output_tokens),
            "--output-tokens-stddev", "0",
            # Without ignore_eos the engine may stop early at its end-of-sequence token.
            "--extra-inputs", "ignore_eos:true",
            # Token counts from the answers' `usage`, as the engine counted them (the
            # client's re-tokenization of generated text may merge tokens).
            "--use-server-token-count",
            "--request-count", str(self.requests),
            "--concurrency", str(self.concurrency),
            "--warmup-request-count", str(self.warmup_requests),
            "--random-seed", str(self.seed),
            "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
            "--artifact-dir", str(artifacts),
        ]


def read_export(artifacts: Path) -> dict:
    path = artifacts / EXPORT_FILE
    if not path.exists():
        raise AssertionError(f"aiperf wrote no {EXPORT_FILE} in {artifacts}: "
                             f"{sorted(p.name for p in artifacts.iterdir())}")
    return json.loads(path.read_text())


def _stat(export: dict, metric: str, stat: str = "avg") -> float | None:
    value = export.get(metric, {}).get(stat)
    return None if value is None else float(value)


def problems(export: dict, profile: Profile) -> list[str]:
    """Why the run does not show a clean, complete profile of `profile` (empty: it does)."""
    found = []
    if not export.get("is_complete") or export.get("was_cancelled"):
        found.append(f"the run did not complete (is_complete={export.get('is_complete')}, "
                     f"was_cancelled={export.get('was_cancelled')})")
    errors = int(_stat(export, "error_request_count") or 0)
    if errors or export.get("error_summary"):
        found.append(f"{errors} requests failed: {json.dumps(export.get('error_summary'))}")
    ok = int(_stat(export, "request_count") or 0)
    if ok != profile.requests:
        found.append(f"{ok} of {profile.requests} requests succeeded")
    osl = export.get("output_sequence_length")
    if not osl:
        found.append("no output token counts (does the stream end with `usage`?)")
    elif not (osl.get("min") == osl.get("max") == profile.output_tokens
              and osl.get("count") == profile.requests):
        found.append(f"output tokens per request: min {osl.get('min')}, max {osl.get('max')} "
                     f"over {osl.get('count')} requests, not {profile.output_tokens} each")
    return found


# figure name -> (metric, statistic, unit) in the export
FIGURES = {
    "requests_per_s": ("request_throughput", "avg", "req/s"),
    "output_tokens_per_s": ("output_token_throughput", "avg", "tokens/s"),
    "ttft_p50_ms": ("time_to_first_token", "p50", "ms"),
    "ttft_p99_ms": ("time_to_first_token", "p99", "ms"),
    "itl_p50_ms": ("inter_token_latency", "p50", "ms"),
    "request_latency_p50_ms": ("request_latency", "p50", "ms"),
}


def figures(export: dict) -> dict[str, tuple[float, str]]:
    """The summary's figures of one run, rounded: {name: (value, unit)}."""
    out = {}
    for name, (metric, stat, unit) in FIGURES.items():
        value = _stat(export, metric, stat)
        if value is None:
            raise AssertionError(f"the export has no {metric}.{stat}")
        out[name] = (round(value, 2), unit)
    return out
