"""bench.tables_diff: two run folders' tables compared at 3 decimals."""

from __future__ import annotations

import pandas as pd

from toolbench_lib.bench.tables_diff import main, tables_diff


def _run(folder, tables: dict[str, pd.DataFrame]):
    (folder / "tables").mkdir(parents=True)
    for name, df in tables.items():
        df.to_csv(folder / "tables" / f"{name}.csv", index=False)
    return folder


def test_lists_moved_cells_rows_columns_and_tables(tmp_path, capsys) -> None:
    base = pd.DataFrame({"subset": ["G1", "G2"], "method": ["rtp", "rtp"], "recall": [0.3721, 0.1431]})
    before = _run(tmp_path / "a", {"main": base, "gone": base, "same": base})
    moved = base.assign(recall=[0.3724, 0.1500], p=[0.01, 0.02])
    extra = pd.concat([moved, pd.DataFrame({"subset": ["G3"], "method": ["ptr"], "recall": [0.2]})])
    after = _run(tmp_path / "b", {"main": extra, "new": base, "same": base.assign(recall=[0.37209, 0.1431])})
    report = tables_diff(before, after)
    assert "Only before: gone" in report and "Only after: new" in report
    assert "columns only after: p" in report and "1 row(s) only after: G3 / ptr" in report
    assert "`recall`: 1 of 2 cells differ (G2 / rtp: 0.143 → 0.150)" in report  # 0.3721 ~ 0.3724 at 3
    assert "Unchanged at 3 decimals (1): same" in report
    assert main([str(before), str(tmp_path / "nowhere")]) == 2
    assert "has no tables/ folder" in capsys.readouterr().err


def test_a_run_name_in_text_cells_can_be_matched(tmp_path) -> None:
    before = _run(tmp_path / "a", {"t": pd.DataFrame({"basis": ["default: mean of 4 runs"], "x": [0.5]})})
    after = _run(tmp_path / "b", {"t": pd.DataFrame({"basis": ["after: mean of 4 runs"], "x": [0.5]})})
    assert "row(s) only before" in tables_diff(before, after)
    assert "Unchanged at 3 decimals (1): t" in tables_diff(before, after, rename={"after": "default"})
