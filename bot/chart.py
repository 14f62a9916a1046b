"""The supply-and-demand chart of ``nodes`` as a PNG (matplotlib, Agg: no display needed).

Made for a phone: one horizontal bar group per GPU model (labels never rotate or overlap,
a long model name gets its own line), large type, the number at the end of every bar, and a
legend on top. Built on a ``Figure`` of its own, not pyplot's global state, so that bot
workers can draw at the same time.

matplotlib (with numpy, pillow and fonttools, about 160 MB) is the ``chart`` extra, not a
dependency of the base install: ``missing()`` says whether it is there without importing it,
and only ``render_png`` imports it.
"""

from __future__ import annotations

import importlib.util
import io
from typing import Any

# Colour-blind-safe (Okabe-Ito): offered, held, free, lost, wanted.
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7")
WIDTH_IN = 6.4  # at 150 dpi: 960 px, a phone screen's width twice over
DPI = 150
INSTALL_HINT = "pip install 'gpubot[chart]'"


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed: the base install draws no chart."""


def missing() -> str | None:
    """None when the chart can be drawn; else why not and what to install."""
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a broken or blocked install
        found = False
    if found:
        return None
    return f"the chart needs matplotlib, which this install lacks: {INSTALL_HINT}"


def render_png(data: dict[str, Any]) -> bytes:
    """The chart of ``handlers.chart.chart_data`` as PNG bytes. Raises ChartUnavailable
    without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ChartUnavailable(missing() or str(err)) from err

    groups = data["groups"] or [{"label": "no GPU nodes", "values": [0.0] * len(COLORS)}]
    series = data["series"]
    n = len(series)
    step = n + 1.6  # bars of a model, then room for the next model's name above them
    fig = Figure(figsize=(WIDTH_IN, 1.5 + 0.3 * step * len(groups)), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    top = max((v for g in groups for v in g["values"]), default=0.0) or 1.0
    for i, label in enumerate(series):
        ys = [gi * step + 1.2 + i for gi in range(len(groups))]
        vals = [g["values"][i] for g in groups]
        bars = ax.barh(ys, vals, height=0.85, color=COLORS[i % len(COLORS)], label=label)
        ax.bar_label(bars, labels=[f"{v:g}" for v in vals], padding=3, fontsize=11)
    for gi, g in enumerate(groups):
        # The model's name on its own line above its bars: full width, never squeezed.
        ax.text(0, gi * step + 0.35, g["label"], fontsize=12, fontweight="bold",
                va="center", ha="left")
    ax.set_yticks([])
    ax.set_ylim(len(groups) * step - 0.2, -0.3)  # first model on top
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel("GPUs", fontsize=12)
    ax.tick_params(axis="x", labelsize=11)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(data["title"], fontsize=14, loc="left", pad=62)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, fontsize=10,
              frameon=False, borderaxespad=0.2)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()
