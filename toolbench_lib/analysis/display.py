"""Numbers as a reader expects them in a displayed table: counts as integers, the rest rounded."""

from __future__ import annotations

import math

import pandas as pd


def format_number(value, digits: int = 3) -> str:
    """``44`` for a whole number, ``0.372`` for others, an empty string for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.{digits}f}"


def format_numbers(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """A copy whose numeric columns are text: integers without decimals, others to ``digits`` places."""
    out = df.copy()
    for column in out.columns:
        if pd.api.types.is_numeric_dtype(out[column]) and not pd.api.types.is_bool_dtype(out[column]):
            out[column] = [format_number(v, digits) for v in out[column].tolist()]
    return out
