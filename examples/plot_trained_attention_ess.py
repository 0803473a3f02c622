"""
=====================================================
Trained attention ESS per kernel on heavy-tailed data
=====================================================

The sharpest face of ensemble collapse is in the attention of a *trained*
model: the effective sample size :math:`1 / \\sum_j w_{ij}^2` of each query's
attention weights, as a fraction of the ensemble size ``n``
(:meth:`~sklearn_measattn.MeasureTransformerRegressor.attention_ess`). On
Pareto ensembles with tail index 0.7 (infinite mean), softmax's integral
diverges: every query puts all its weight on the most extreme point, and
ESS / n sits at ``1/n``. Slower-growing kernels keep a large fraction, and so
does softmax once the data are symlog-transformed.

This is one column of :ref:`phase_diagram`, which crosses every kernel with
the tail index on both benchmarks, measured at a larger size.
"""

# %%
# Train one small model per kernel and transform
# ----------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.metrics import ATTENTION_ESS_THRESHOLD

X, y = make_matrix_inverse(n_samples=48, n_points=128, tail="pareto", tail_index=0.7, random_state=0)
X_test, _ = make_matrix_inverse(n_samples=16, n_points=128, tail="pareto", tail_index=0.7, random_state=1)

kernels = ["softmax", "poly", "log", "sigmoid"]
ess = {}
for transform in (None, "symlog"):
    for kernel in kernels:
        model = MeasureTransformerRegressor(
            kernel=kernel, transform=transform, d_model=16, n_heads=2, n_layers=2,
            dim_feedforward=32, max_epochs=3, batch_size=16, random_state=0,
        ).fit(X, y)
        # (n_samples, n_heads): one value per held-out measure and head.
        ess[kernel, transform] = model.attention_ess(X_test).ravel()
        print(f"{kernel:8s} {str(transform):7s} median ESS/n = {np.median(ess[kernel, transform]):.3f}")

# %%
# Plot the distribution over held-out measures and heads
# ------------------------------------------------------
fig, ax = plt.subplots(figsize=(7, 3.5))
positions = np.arange(len(kernels))
for offset, transform, color in ((-0.18, None, "C3"), (0.18, "symlog", "C0")):
    data = [ess[kernel, transform] for kernel in kernels]
    parts = ax.boxplot(data, positions=positions + offset, widths=0.3, patch_artist=True)
    for box in parts["boxes"]:
        box.set_facecolor(color)
    ax.plot([], [], color=color, lw=6, label=f"transform={transform}")
ax.axhline(1 / 128, color="k", ls=":", lw=1, label="1/n (one point takes all)")
ax.axhline(ATTENTION_ESS_THRESHOLD, color="0.5", ls="--", lw=1, label="collapse threshold")
ax.set_xticks(positions, kernels)
ax.set_yscale("log")
ax.set_ylabel("trained attention ESS / n")
ax.set_title("First layer, Pareto(0.7) ensembles of 128 points")
ax.legend(fontsize=7, loc="lower right")
fig.tight_layout()
plt.show()
