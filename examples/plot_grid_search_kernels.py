"""
============================================
Choosing the attention kernel by grid search
============================================

The attention kernel is an ordinary hyper-parameter of
:class:`~sklearn_measattn.MeasureTransformerRegressor`, so scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV` can choose it. Distances between
measures enter as scorers: here the negative Wasserstein-1 distance
(:data:`~sklearn_measattn.metrics.neg_wasserstein_scorer`) between each
predicted ensemble and its target.

The sizes are tiny so that the search runs in seconds; rankings at this size
are noisy. See :ref:`scaling` for running a real search on a cluster, and
:ref:`kernel_study` for what a learnt degree and sparse kernels do at a
larger size.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_sheared_swap
from sklearn_measattn.metrics import neg_wasserstein_scorer

X, y = make_sheared_swap(n_samples=48, n_points=32, tail="student_t", tail_index=1.5, random_state=0)

model = MeasureTransformerRegressor(
    d_model=16, n_heads=2, n_layers=1, dim_feedforward=32, lr=3e-3, batch_size=8, max_epochs=8, random_state=0
)
search = GridSearchCV(
    model,
    {"kernel": ["softmax", "poly", "log", "sigmoid"]},
    scoring=neg_wasserstein_scorer,
    cv=KFold(n_splits=2, shuffle=True, random_state=0),
)
search.fit(X, y)
print("best kernel:", search.best_params_["kernel"])

results = search.cv_results_
kernels = [str(k) for k in results["param_kernel"]]
mean, std = results["mean_test_score"], results["std_test_score"]
for kernel, m, s, rank in zip(kernels, mean, std, results["rank_test_score"]):
    print(f"{kernel:>8s}  score {m:8.4f} +/- {s:.4f}  rank {rank}")

# %%
# Mean held-out Wasserstein-1 distance per kernel (lower is better), with the
# spread over the two folds.
distance = -mean
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(kernels, distance, yerr=std, capsize=4, color=["C3" if k == "softmax" else "C0" for k in kernels])
ax.set_ylabel("held-out Wasserstein-1 distance")
ax.set_title("GridSearchCV over attention kernels (sheared swap, Student-t 1.5)")
ax.set_ylim(0, 1.15 * np.max(distance + std))
fig.tight_layout()
