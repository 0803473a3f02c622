"""
==================================================
How sample size changes what the distances can see
==================================================

Empirical energy and Wasserstein distances compare *samples*, and a small
ensemble rarely contains points from far in the tails. So how strongly these
distances react to a difference in the tails depends on the ensemble size.

Here the reference ensembles are Gaussian and the alternatives are Student-t
with tail index :math:`\\alpha` (Student-t tends to the Gaussian as
:math:`\\alpha` grows). For each ensemble size ``n`` the distance between a
Gaussian and a Student-t ensemble is divided by the distance between two
independent Gaussian ensembles of the same size (the *noise floor*): a ratio
near 1 means the distance cannot tell the two laws apart at that size. See
:doc:`/sample_size` for the study behind this example.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.metrics import energy_distance, wasserstein_distance


def draw(tail, n_points, seed, tail_index=1.5, n_repeats=8):
    # condition=1 makes A = I, so X is a batch of plain draws of the base family.
    X, _ = make_matrix_inverse(
        n_samples=n_repeats, n_points=n_points, tail=tail, tail_index=tail_index, condition=1.0, random_state=seed
    )
    return X


sizes = [32, 128, 512]
tail_indices = [1.5, 2.0, 3.0, 5.0, 10.0, 30.0]
metrics = {"energy distance": energy_distance, "Wasserstein-1 distance": wasserstein_distance}

ratios = {name: np.empty((len(sizes), len(tail_indices))) for name in metrics}
for i, n in enumerate(sizes):
    reference = draw("gaussian", n, seed=100 + i)
    floor_sample = draw("gaussian", n, seed=200 + i)
    for name, metric in metrics.items():
        floor = metric(reference, floor_sample)
        for j, alpha in enumerate(tail_indices):
            ratios[name][i, j] = metric(reference, draw("student_t", n, seed=300 + 10 * i + j, tail_index=alpha)) / floor
    print(f"n = {n:4d}: energy ratio at alpha=1.5: {ratios['energy distance'][i, 0]:6.1f}, "
          f"W1 ratio: {ratios['Wasserstein-1 distance'][i, 0]:6.1f}")

# %%
# Distance over noise floor, against the tail index of the alternative.
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, (name, values) in zip(axes, ratios.items()):
    for i, n in enumerate(sizes):
        ax.plot(tail_indices, values[i], marker="o", label=f"n = {n}")
    ax.axhline(1.0, color="k", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(tail_indices, [f"{a:g}" for a in tail_indices])
    ax.minorticks_off()
    ax.set_xlabel("tail index alpha of the Student-t alternative")
    ax.set_ylabel("distance / noise floor")
    ax.set_title(f"{name}: Gaussian vs Student-t")
axes[0].legend(title="ensemble size")
fig.suptitle("Sensitivity of empirical distances to the tails, by ensemble size")
fig.tight_layout()
