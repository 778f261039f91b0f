"""Displayed numbers: counts as integers, fractions rounded, missing values blank."""

import numpy as np
import pandas as pd

from toolbench_lib.analysis.display import format_number, format_numbers


def test_counts_print_as_integers_and_fractions_rounded():
    df = pd.DataFrame({"id": ["wins", "recall", "none"], "this_run": [44.0, 0.37249, np.nan],
                       "n": [1200, 3, 0], "ok": [True, False, True]})
    out = format_numbers(df)
    assert out["this_run"].tolist() == ["44", "0.372", ""]
    assert out["n"].tolist() == ["1,200", "3", "0"]
    assert out["ok"].tolist() == [True, False, True] and out["id"].tolist() == df["id"].tolist()
    assert "44.000000" not in out.to_string()
    assert format_number(-2.5, digits=1) == "-2.5" and format_number("2.4–2.5") == "2.4–2.5"
