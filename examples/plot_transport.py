"""
====================================================
The learnt map at new points: transport and displays
====================================================

A fitted :class:`~sklearn_measattn.MeasureTransformerRegressor` maps each point
``x`` to ``T_mu(x)``, where the input measure ``mu`` (the *context*) enters
through attention. ``predict(X)`` evaluates the map at the points of ``X``
itself; ``transport(X, points)`` evaluates it anywhere: the query points attend
to the context at every layer but are not part of the measure, so they do not
change the map nor each other's images.

Here a small model learns the matrix-inverse map on Gaussian ensembles: the
target of ``law(A Z)`` is ``law(A^-1 Z)``, so the map of a measure stretched
along one direction squeezes along it. The picture pushes a regular grid of
query points through the map of one held-out context ensemble. The second
figure is :class:`~sklearn_measattn.MeasureDisplay`, which draws input, target
and predicted ensembles side by side.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from sklearn_measattn import MeasureDisplay, MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse

X, y = make_matrix_inverse(n_samples=160, n_points=48, tail="gaussian", condition=6.0, random_state=0)
X_train, y_train, X_test, y_test = X[:128], y[:128], X[128:], y[128:]
model = MeasureTransformerRegressor(
    kernel="log", d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, lr=2e-3, batch_size=16, max_epochs=20,
    random_state=0,
).fit(X_train, y_train)

# %%
# A grid of query points, transported by the map of one held-out measure
# ----------------------------------------------------------------------
#
# ``points`` holds one set of query points per context measure; here one
# measure and a 21 x 21 grid (441 points, many more than the 48 context points).
i = int(np.argmax([np.linalg.cond(np.cov(x.T)) for x in X_test]))  # the most stretched held-out measure
ticks = np.linspace(-3, 3, 21)
grid = np.stack(np.meshgrid(ticks, ticks), axis=-1)  # (21, 21, 2)
images = model.transport(X_test[i : i + 1], grid.reshape(1, -1, 2))[0].reshape(grid.shape)
# The images of the context's own points are its prediction.
assert np.allclose(model.transport(X_test[i : i + 1], X_test[i : i + 1]), model.predict(X_test[i : i + 1]), atol=1e-5)

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4.4))
for ax, points, title in ((left, grid, "context ensemble and query grid"), (right, images, "images of the grid")):
    for k in range(grid.shape[0]):  # grid lines, and where the map sends them
        ax.plot(points[k, :, 0], points[k, :, 1], color="0.75", lw=0.7)
        ax.plot(points[:, k, 0], points[:, k, 1], color="0.75", lw=0.7)
    ax.scatter(points[..., 0], points[..., 1], c=grid[..., 0] + grid[..., 1], cmap="viridis", s=8, zorder=2)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
left.scatter(X_test[i, :, 0], X_test[i, :, 1], s=14, c="C3", zorder=3, label="context (input measure)")
right.scatter(y_test[i, :, 0], y_test[i, :, 1], s=14, c="C3", marker="x", zorder=3, label="target ensemble")
left.legend(fontsize=8, loc="lower right")
right.legend(fontsize=8, loc="lower right")
fig.tight_layout()
plt.show()

# %%
# Input, target and predicted ensembles with MeasureDisplay
# ---------------------------------------------------------
#
# ``from_estimator`` predicts the chosen measures and draws them; the target and
# predicted panels of a row share their limits, so a prediction that is too
# wide or too narrow looks it. ``scale="symlog"`` shows heavy-tailed
# ensembles whole; ``feature_names`` labels the axes (e.g. the columns of a
# table read with :func:`~sklearn_measattn.datasets.load_measures`).
display = MeasureDisplay.from_estimator(
    model, X_test, y_test, measures=[i, 0], feature_names=["u", "v"],
    measure_names=[f"held-out {k}" for k in range(len(X_test))], title="matrix inverse, Gaussian control",
)
plt.show()
