"""One figure style for every notebook and report figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

METHOD_COLORS = {"rtp": "#1f77b4", "ptr": "#d62728", "router": "#2ca02c", "oracle": "#7f7f7f"}
METHOD_LABELS = {"rtp": "RtP (retrieve, then plan)", "ptr": "PtR (plan, then retrieve)"}
# Sets have their own palette, with none of the architectures' colours: blue and red always mean RtP and PtR.
SET_COLORS = {"G1": "#009E73", "G2": "#E69F00", "G3": "#CC79A7"}
# Fused and learned methods: neither an architecture's colour nor a set's.
OTHER_COLORS = ("#9467bd", "#8c564b", "#000000", "#bcbd22", "#17becf", "#7f7f7f")
LEGEND_SIZE = 11  # points: legible when a figure is projected at 1,280 px
# One look per retriever family in every figure: the architecture keeps its colour, the family its hatch
# (bars) or line style (lines).
FAMILY_HATCH = {"dense": "", "bm25": "//", "hybrid": "..", "hybrid-rrf": "xx"}
FAMILY_LINESTYLE = {"dense": "-", "bm25": "--", "hybrid": ":", "hybrid-rrf": "-."}


def use_style() -> None:
    """Seaborn whitegrid, colour-blind palette, readable sizes."""
    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind")
    plt.rcParams.update({"figure.figsize": (7, 4), "figure.dpi": 100, "axes.titleweight": "bold",
                         "legend.fontsize": LEGEND_SIZE, "legend.title_fontsize": LEGEND_SIZE})


def paper_marks(ax, pos, refs, label: str | None = None) -> None:
    """The paper's values (None: none) as open black diamonds at ``pos``, the first one's named ``label``."""
    for j, (x, ref) in enumerate(zip(pos, refs, strict=True)):
        if ref is not None:
            ax.plot(x, ref, marker="D", mfc="white", color="black", markersize=6,
                    label=label if j == 0 else None)


def set_panels(table, height: float = 3.6, sharey: bool = True):
    """One panel per set of ``table`` (its ``subset`` column, in order), side by side, titled by its set: the
    figure and, per panel, ``(ax, set, the set's rows)``."""
    sets = list(dict.fromkeys(table["subset"]))
    fig, axes = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), height), sharey=sharey, squeeze=False)
    for ax, s in zip(axes[0], sets, strict=True):
        ax.set_title(s)
    return fig, [(ax, s, table[table["subset"] == s]) for ax, s in zip(axes[0], sets, strict=True)]


def side_legend(fig, ax) -> None:
    """``ax``'s legend for the whole figure, right of its panels."""
    fig.legend(*ax.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
