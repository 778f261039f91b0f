"""Every discovery method by name: the base retrievers of :mod:`.retrievers` and the fused specs of
:mod:`.fused` and the learned rankers of :mod:`.ltr`, all registered once this module is imported.

:mod:`.fused` builds on :mod:`.retrievers` (it registers into its table and looks up the base methods), so
the table's own module cannot import it back; the study and the CLI import this module instead.
"""

from __future__ import annotations

from . import fused, ltr  # noqa: F401  (register the named fusion specs and the learned rankers)
from .retrievers import RETRIEVERS, Retriever


def load_methods() -> dict[str, Retriever]:
    """Every registered method, the fused ones of :mod:`.fused` included."""
    return RETRIEVERS
