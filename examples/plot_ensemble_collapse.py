"""
===========================================
Ensemble collapse: attention ESS and spread
===========================================

Two of the three faces of ensemble collapse (see :ref:`metrics`):

1. *attention level*: the effective sample size :math:`1 / \\sum_j w_{ij}^2`
   of each query's attention weights, as a fraction of the ensemble size ``n``
   (:func:`~sklearn_measattn.metrics.attention_ess`). It needs no training:
   random query and key projections of the ensemble suffice. On heavy tails,
   softmax gives almost all the weight to the most extreme points, and its
   ESS fraction falls as ``n`` grows, because larger ensembles reach further
   into the tail; slower-growing kernels keep a much larger fraction;
2. *within an ensemble*: the spread ratio of trained models' predictions
   (:func:`~sklearn_measattn.metrics.spread_ratio`), near 1 for healthy
   predictions and near 0 when the predicted particles sit on one point.

Where trained models collapse, kernel by kernel and tail index by tail index,
is the subject of :ref:`phase_diagram`.
"""

# %%
# Attention ESS against ensemble size
# -----------------------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_measattn import KERNEL_NAMES, MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.metrics import attention_ess, spread_ratio

sizes = [16, 64, 256, 1024]
tails = {"gaussian": "Gaussian control", "student_t": "Student-t, tail index 1.5"}
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, (tail, title) in zip(axes, tails.items()):
    for kernel in KERNEL_NAMES:
        ess = []
        for n in sizes:
            X, _ = make_matrix_inverse(n_samples=8, n_points=n, tail=tail, tail_index=1.5, random_state=0)
            ess.append(attention_ess(X, kernel, n_draws=2, random_state=0).mean())
        ax.plot(sizes, ess, marker="o", label=kernel, lw=2.5 if kernel == "softmax" else 1.5)
        if tail == "student_t":
            print(f"{kernel:>8s}: ESS fraction at n = {sizes[0]}: {ess[0]:.3f}, at n = {sizes[-1]}: {ess[-1]:.3f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ensemble size n")
    ax.set_title(title)
axes[0].set_ylabel("attention ESS / n")
axes[0].set_ylim(0, 1.02)
axes[0].legend(title="kernel", loc="lower left", ncols=2)
fig.suptitle("Attention-level collapse: effective sample size of the attention weights")
fig.tight_layout()

# %%
# Spread ratio of trained models
# ------------------------------
# Tiny models (one per kernel) on the heavy-tailed matrix-inverse task, raw
# data, no transform. At these sizes the residual stream can keep the
# predicted particles apart even where attention concentrates, so the spread
# ratio need not follow the ESS: the three diagnostics are measured separately
# for this reason.
X_train, y_train = make_matrix_inverse(n_samples=64, n_points=64, tail="student_t", tail_index=1.5, random_state=0)
X_test, y_test = make_matrix_inverse(n_samples=32, n_points=64, tail="student_t", tail_index=1.5, random_state=1)
kernels = ["softmax", "poly", "log", "sigmoid"]
ratios = []
for kernel in kernels:
    model = MeasureTransformerRegressor(
        kernel=kernel, d_model=16, n_heads=2, n_layers=2, dim_feedforward=32,
        lr=3e-3, batch_size=16, max_epochs=12, random_state=0,
    ).fit(X_train, y_train)
    ratios.append(spread_ratio(y_test, model.predict(X_test), multioutput="raw_values"))
    print(f"{kernel:>8s}: median spread ratio {np.nanmedian(ratios[-1]):.3f}")

fig, ax = plt.subplots(figsize=(6, 3.8))
ax.boxplot(ratios, tick_labels=kernels)
ax.axhline(1.0, color="k", lw=1, ls="--")
ax.set_ylim(bottom=0)
ax.set_ylabel("spread ratio per test sample")
ax.set_title("Within-ensemble spread of trained models (Student-t 1.5)")
fig.tight_layout()
