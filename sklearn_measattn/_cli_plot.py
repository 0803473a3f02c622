"""The ``--plot`` figure of ``measattn compare``: one held-out measure per model, plus the table."""

from __future__ import annotations

import numpy as np

from .experiments import comparison_table


def _robust_limits(points, q=0.02, pad=0.1):
    lo = np.quantile(points, q, axis=0)
    hi = np.quantile(points, 1 - q, axis=0)
    span = np.maximum(hi - lo, 1e-9)
    return lo - pad * span, hi + pad * span


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
        second = 1 if y.shape[1] > 1 else 0
        ax.scatter(y[:, 0], y[:, second], s=6, c="0.6", label="target")
        ax.scatter(yp[:, 0], yp[:, second], s=6, c="C3", label="predicted")
        lo, hi = _robust_limits(np.vstack([y, yp])[:, [0, second]])
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_title(f"{key[0]} / {key[1]}", fontsize=9)
        ax.tick_params(labelsize=7)
    if keys:
        fig.axes[0].legend(fontsize=7, loc="upper left")
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
