"""
==========
Quickstart
==========

Fit a :class:`~sklearn_measattn.MeasureTransformerRegressor` on the
matrix-inverse benchmark with heavy-tailed (Student-t, tail index 1.5)
ensembles, predict the output ensembles of unseen inputs, score them, and plot
one predicted ensemble against its target.

This script also runs on its own (``python examples/plot_quickstart.py``); it
prints the scores and opens no window.
"""

# %%
# Data: each sample is a pair of ensembles. ``X[i]`` holds 64 draws of
# :math:`A_i Z` and ``y[i]`` 64 draws of :math:`A_i^{-1} Z'`, for a random
# symmetric positive definite :math:`A_i`: the target depends on the input's
# scatter matrix, so the model has to look at the whole ensemble.
import matplotlib.pyplot as plt

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.metrics import spread_ratio, wasserstein_distance

X_train, y_train = make_matrix_inverse(n_samples=160, n_points=64, tail="student_t", tail_index=1.5, random_state=0)
X_test, y_test = make_matrix_inverse(n_samples=32, n_points=64, tail="student_t", tail_index=1.5, random_state=1)
print("X_train", X_train.shape, "y_train", y_train.shape)

# %%
# A small post-norm transformer with the ``log`` attention kernel, trained with
# the energy distance between predicted and target ensembles.
model = MeasureTransformerRegressor(
    kernel="log",
    d_model=16,
    n_heads=2,
    n_layers=2,
    dim_feedforward=32,
    lr=3e-3,
    batch_size=16,
    max_epochs=30,
    random_state=0,
)
model.fit(X_train, y_train)
y_pred = model.predict(X_test)

print(f"score (negative energy distance): {model.score(X_test, y_test):.4f}")
print(f"Wasserstein-1 distance:           {wasserstein_distance(y_test, y_pred):.4f}")
print(f"spread ratio (1 = as spread as the target, 0 = collapsed): {spread_ratio(y_test, y_pred):.3f}")

# A reference point: the Wasserstein-1 distance of the trivial prediction
# "output = input ensemble".
print(f"Wasserstein-1 of the identity baseline: {wasserstein_distance(y_test, X_test):.4f}")

# %%
# One test sample: the input ensemble, its target and the prediction. The axes
# are ``symlog`` so that the heavy tails and the bulk are both visible.
i = 0
fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharex=True, sharey=True)
axes[0].scatter(*X_test[i].T, s=12, color="0.5", label="input X")
axes[0].set_title("input ensemble")
axes[1].scatter(*y_test[i].T, s=14, label="target y", alpha=0.7)
axes[1].scatter(*y_pred[i].T, s=14, marker="x", label="prediction", alpha=0.8)
axes[1].set_title("predicted ensemble vs target")
for ax in axes:
    ax.set_xscale("symlog")
    ax.set_yscale("symlog")
    ax.legend(loc="upper left")
    ax.set_xlabel("$x_1$")
axes[0].set_ylabel("$x_2$")
fig.tight_layout()
# (No ``plt.show()``: the gallery collects the figure, and as a plain script
# this file must not block on a window.)
