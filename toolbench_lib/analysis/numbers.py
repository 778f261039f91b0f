"""How the report writes numbers, in one place: counts with thousands separators, other numbers with three
decimals, p-values as ``p = 0.014`` / ``p < 0.001``, and never ``nan``."""

from __future__ import annotations

import math

from ..data.markdown import md_number

NOT_AVAILABLE = "n/a"
ONE_RUN = "n/a (one run)"


def _missing(x) -> bool:
    try:
        return x is None or math.isnan(float(x))
    except (TypeError, ValueError):
        return True


def fmt_count(x, missing: str = NOT_AVAILABLE) -> str:
    """An integer count with thousands separators: ``47,651``."""
    return missing if _missing(x) else f"{int(round(float(x))):,}"


def fmt_number(x, decimals: int = 3, missing: str = NOT_AVAILABLE) -> str:
    """A measured number with ``decimals`` decimals (a whole number of 1,000 or more as a count)."""
    if _missing(x):
        return missing
    x = float(x)
    if x.is_integer() and abs(x) >= 1000:
        return fmt_count(x)
    text = f"{x:.{decimals}f}"
    return "0." + "0" * decimals if text.lstrip("-") == "0." + "0" * decimals else text


def fmt_signed(x, decimals: int = 3, missing: str = NOT_AVAILABLE) -> str:
    """A difference with its sign: ``+0.045``, ``-0.083``."""
    if _missing(x):
        return missing
    text = fmt_number(x, decimals)
    return text if text.startswith("-") or float(x) == 0 else "+" + text


def fmt_p(p, missing: str = ONE_RUN) -> str:
    """A p-value as every table prints it (:func:`~toolbench_lib.data.markdown.md_number`): ``p = 0.0141``,
    ``p < 0.001``; ``missing`` when the test could not run."""
    if _missing(p):
        return missing
    text = md_number(float(p), p_value=True)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def fmt_percent(x, missing: str = NOT_AVAILABLE) -> str:
    """A number already in percent, with one decimal and its sign: ``47.9%``."""
    return missing if _missing(x) else f"{float(x):.1f}%"


def fmt_ci(low, high, decimals: int = 3) -> str:
    """``[0.312, 0.401]``, or n/a when either bound is missing."""
    return (NOT_AVAILABLE if _missing(low) or _missing(high)
            else f"[{fmt_number(low, decimals)}, {fmt_number(high, decimals)}]")


def join_words(names: list[str], conjunction: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c`` (or another ``conjunction``)."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


def leader(rtp: float, ptr: float) -> str:
    """Which architecture's value is larger: ``PtR``, ``RtP`` or ``neither``."""
    return "PtR" if ptr > rtp else "RtP" if rtp > ptr else "neither"
