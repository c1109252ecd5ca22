"""Figures a suite measured (start-up seconds, image size...), for the QA summary.

`record("startup_to_ready_s", 31.2, "s")` adds one to the JSON file named by
$TVB_QA_FIGURES (the QA runner sets it, one file per suite) and prints it, so a plain
pytest run shows it too (with -s or in the captured output of a failure).
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def record(name: str, value: float | int | str, unit: str = "", note: str = "") -> None:
    print(f"figure: {name} = {value} {unit}".rstrip())
    path = os.environ.get("TVB_QA_FIGURES")
    if not path:
        return
    file = Path(path)
    figures = json.loads(file.read_text()) if file.exists() else {}
    figures[name] = {"value": value, "unit": unit, **({"note": note} if note else {})}
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(figures, indent=2) + "\n")
