"""benchmarks/active_benchmark.py on tiny generated MD-Agreement files: it runs every strategy and
the ActiveLab reference, prints the curves and the aims, writes the plot; skips without data."""

from __future__ import annotations

import sys
from pathlib import Path

from test_lewidi import EN_BAD, EN_OK, corpus_items, write_json

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import active_benchmark as AB  # noqa: E402


def test_a_tiny_project_runs_every_strategy_and_states_the_aims(tmp_path, capsys):
    write_json(corpus_items(EN_BAD, EN_OK, split="train", n_copies=8, seed=1), tmp_path / "MD-Agreement_train.json")
    write_json(corpus_items(EN_BAD, EN_OK, split="test", n_copies=2, seed=3, start=500),
               tmp_path / "MD-Agreement_test.json")
    plot = tmp_path / "out" / "curve.png"
    assert AB.main([str(tmp_path), "--seeds", "2", "--rounds", "2", "--budget", "6", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "64 train items, 320 annotations by 40 annotators; 16 test items" in out
    for name in (*AB.PSYATTRS, AB.REFERENCE):
        assert f"  {name}: " in out
    assert "soft CE on the test split" in out and "macro-F1 on the test split" in out
    # seed: 10% of 64 items = 6 annotations, then two rounds of 6
    assert [line.split()[0] for line in out.split("soft CE on the test split")[1].splitlines()[2:5]] == ["6", "12", "18"]
    assert "aim 1 (random's final soft CE" in out and "aim 2 (no worse than ActiveLab" in out
    assert plot.is_file() and plot.stat().st_size > 1000


def test_without_the_data_it_says_so_and_exits_0(tmp_path, capsys):
    assert AB.main([str(tmp_path / "nowhere")]) == 0
    assert capsys.readouterr().out.startswith("skipped: MD-Agreement not found")
