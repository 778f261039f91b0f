"""Two runs' tables side by side at 3 decimals: what a change of code moved."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

MAX_SHOWN = 8  # differing cells listed per column


def _is_text(s: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s))


def table_diff(name: str, a: pd.DataFrame, b: pd.DataFrame, decimals: int = 3) -> list[str]:
    """Markdown lines of what differs between two versions of one table (empty when nothing does)."""
    lines = [f"- columns only {label}: {', '.join(only)}" for label, only in
             (("before", [c for c in a.columns if c not in b.columns]),
              ("after", [c for c in b.columns if c not in a.columns])) if only]
    keys = [c for c in a.columns if c in b.columns and _is_text(a[c]) and _is_text(b[c])]  # matching the rows
    numeric = [c for c in a.columns if c in b.columns and c not in keys
               and pd.api.types.is_numeric_dtype(a[c]) and pd.api.types.is_numeric_dtype(b[c])]
    if keys:
        a = a.assign(_n=a.groupby(keys, dropna=False).cumcount())
        b = b.assign(_n=b.groupby(keys, dropna=False).cumcount())
        merged = a.merge(b, on=[*keys, "_n"], how="outer", suffixes=("_before", "_after"), indicator=True)
    else:
        if len(a) != len(b):
            lines.append(f"- {len(a)} rows before, {len(b)} after (no text column to match them on)")
        n = min(len(a), len(b))
        merged = a.head(n).add_suffix("_before").join(b.head(n).add_suffix("_after")).assign(_merge="both")
    for side, label in (("left_only", "before"), ("right_only", "after")):
        rows = merged[merged["_merge"] == side]
        if len(rows):
            shown = "; ".join(" / ".join(str(r[k]) for k in keys) for _, r in rows.head(MAX_SHOWN).iterrows())
            lines.append(f"- {len(rows)} row(s) only {label}: {shown}")
    both = merged[merged["_merge"] == "both"]
    for c in numeric:
        x = both[f"{c}_before"].astype(float).round(decimals).to_numpy()
        y = both[f"{c}_after"].astype(float).round(decimals).to_numpy()
        differ = ~((x == y) | (np.isnan(x) & np.isnan(y)))
        if differ.any():
            where = both[differ].head(MAX_SHOWN)
            shown = "; ".join(
                (" / ".join(str(r[k]) for k in keys) + ": " if keys else f"row {i}: ")
                + f"{r[f'{c}_before']:.{decimals}f} → {r[f'{c}_after']:.{decimals}f}"
                for i, r in where.iterrows())
            lines.append(f"- `{c}`: {int(differ.sum())} of {len(both)} cells differ ({shown})")
    return [f"### {name}", *lines] if lines else []


def _renamed(table: pd.DataFrame, rename: dict[str, str]) -> pd.DataFrame:
    """``table`` with each ``old`` run name in its text cells written as ``new`` (two runs' own names)."""
    def swap(v: object) -> object:
        for old, new in rename.items():
            v = v.replace(old, new) if isinstance(v, str) else v
        return v

    out = table.copy()
    for c in [c for c in out.columns if _is_text(out[c])]:
        out[c] = out[c].map(swap)
    return out


def tables_diff(before: Path, after: Path, decimals: int = 3, rename: dict[str, str] | None = None) -> str:
    """The Markdown report of every table of two run folders (``rename``: run names of ``after`` written as
    ``before``'s in text cells, so rows match)."""
    tb, ta = Path(before) / "tables", Path(after) / "tables"
    names_b = {p.stem for p in tb.glob("*.csv")}
    names_a = {p.stem for p in ta.glob("*.csv")}
    out = [f"# Tables of {before} against {after} at {decimals} decimals", ""]
    out += [f"Only {label}: {', '.join(sorted(only))}"
            for label, only in (("before", names_b - names_a), ("after", names_a - names_b)) if only]
    same = []
    for name in sorted(names_b & names_a):
        lines = table_diff(name, pd.read_csv(tb / f"{name}.csv"),
                           _renamed(pd.read_csv(ta / f"{name}.csv"), rename or {}), decimals)
        if lines:
            out += ["", *lines]
        else:
            same.append(name)
    out += ["", f"Unchanged at {decimals} decimals ({len(same)}): {', '.join(same) or 'none'}"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before", type=Path, help="run folder before (holding tables/)")
    parser.add_argument("after", type=Path, help="run folder after")
    parser.add_argument("--decimals", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write the report here too")
    parser.add_argument("--rename", action="append", default=[], metavar="AFTER=BEFORE",
                        help="a run name of AFTER's text cells written as BEFORE's (repeatable)")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not (folder / "tables").is_dir():
            print(f"error: {folder} has no tables/ folder (a run folder of `make run`)", file=sys.stderr)
            return 2
    rename = dict(r.split("=", 1) for r in args.rename if "=" in r)
    report = tables_diff(args.before, args.after, args.decimals, rename)
    if args.out:
        args.out.write_text(report)
    print(report, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
