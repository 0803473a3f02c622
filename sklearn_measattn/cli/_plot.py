"""The ``--plot`` figure of ``measattn compare``: one held-out measure per model, plus the table."""

from __future__ import annotations

import numpy as np

from ..experiments import comparison_table
from ..inspection import MeasureDisplay


def plot_comparison(path, examples, summary, title, *, judge=True):
    """Scatter target vs predicted ensemble of one held-out measure per model, with the table under them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [(s["kernel"], s["transform"]) for s in summary if (s["kernel"], s["transform"]) in examples]
    transforms = list(dict.fromkeys(t for _, t in keys))
    kernels = list(dict.fromkeys(k for k, _ in keys))
    n_rows, n_cols = max(len(transforms), 1), max(len(kernels), 1)
    fig = plt.figure(figsize=(3.0 * n_cols, 3.0 * n_rows + 0.35 * (len(summary) + 3)))
    grid = fig.add_gridspec(n_rows + 1, n_cols, height_ratios=[3.0] * n_rows + [0.35 * (len(summary) + 3)])
    for key in keys:
        ex = examples[key]
        ax = fig.add_subplot(grid[transforms.index(key[1]), kernels.index(key[0])])
        y, yp = np.asarray(ex["y"]), np.asarray(ex["y_pred"])
        MeasureDisplay.from_predictions(y[None], yp[None], ax=ax, kind="overlay", clip=0.02, point_size=6,
                                        measure_names=[f"{key[0]} / {key[1]}"])
    table_ax = fig.add_subplot(grid[n_rows, :])
    table_ax.axis("off")
    header, body = comparison_table(summary, judge=judge)
    table = table_ax.table(cellText=body, colLabels=header, loc="center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    fig.suptitle(title + " (one held-out measure, 2% tails clipped from the view)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
