"""Run every benchmark script in this folder (``bench_*.py``), one after another (``make bench``).

Each compares this code against a reference measured in the same run; the one-off research probes live in
``experiments/`` and are not run here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n===== {script.name} =====", flush=True)
        rc = subprocess.call([sys.executable, script.name], cwd=HERE)
        if rc:
            failed.append(script.name)
    if failed:
        print("failed:", ", ".join(failed))
        sys.exit(1)
