"""Smoke test of ``benchmarks/synth_fidelity.py``: the real script, a small trace prefix, fits cached and reused."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, out: str) -> str:
    cmd = [sys.executable, "benchmarks/synth_fidelity.py", "--trace", "sdsc-sp2", "--jobs", "3000", "--models",
           "arrivals", "lublin", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return (tmp_path / out).read_text()


def test_benchmark_table_and_fit_cache(tmp_path):
    first = _run(tmp_path, "a.md")
    assert "| metric | better | floor | bootstrap | arrivals | lublin | test |" in first
    assert "| KS wait (whole trace) | lower |" in first and "| exact-copy share | lower |" in first
    board = first[first.index("Scoreboard"):]
    assert "| bootstrap |" in board and "| lublin |" in board
    assert "(not: " in board.split("| bootstrap |")[1].splitlines()[0]  # the memorizer copies train: not private
    fits = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir())
    assert [f.rsplit("-", 1)[0] for f in fits] == ["sdsc-sp2-3000-arrivals", "sdsc-sp2-3000-lublin"]
    # a second run loads the fits (the recorded fit seconds come back) and samples the same tables
    stamp = tmp_path / "cache" / f"{fits[0]}.fit_s.json"
    assert json.loads(stamp.read_text())["fit_s"] < 60
    stamp.write_text(json.dumps({"fit_s": 1234.0}))
    second = _run(tmp_path, "b.md")
    fit_row = next(line for line in second.splitlines() if line.startswith("| fit_s |"))
    assert "1,234" in fit_row
    assert _metric_rows(first) == _metric_rows(second)


def _metric_rows(text: str) -> list[str]:
    """The table's rows without the timing rows."""
    return [line for line in text.splitlines()
            if line.startswith("| ") and not line.startswith(("| fit_s", "| sample_s", "| score_s"))]
