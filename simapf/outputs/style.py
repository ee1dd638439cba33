"""simapf's house style for figures: colour-blind-safe colours, sizes readable at 800 px wide.

    import matplotlib.pyplot as plt, simapf.outputs.style
    plt.rcParams.update(simapf.outputs.style.RC)
    ax.plot(t, y, color=simapf.outputs.style.COLORS["memory"])

The palette is Okabe and Ito's eight colours ("Color Universal Design", 2008), which stay
distinct for the common colour-vision deficiencies; the notebooks and figures use it in this
order, and the same meaning keeps the same colour everywhere (`COLORS`).
"""

from __future__ import annotations

from typing import Any

from cycler import cycler

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]

COLORS = {
    "memory": OKABE_ITO[0],
    "heap": OKABE_ITO[5],
    "limit": OKABE_ITO[3],
    "cpu": OKABE_ITO[1],
    "gc": OKABE_ITO[4],
    "model": OKABE_ITO[0],
    "measured": OKABE_ITO[7],
}

# A KEP figure is pasted at ~800 px wide: at 100 dpi and 8 inches, 10-11 pt text stays legible.
RC: dict[str, Any] = {
    "figure.figsize": (8.0, 4.5),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=OKABE_ITO),
    "svg.hashsalt": "simapf",
}
