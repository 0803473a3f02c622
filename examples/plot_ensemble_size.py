"""
=====================================================
Ensemble size: a model trained on N points, used on n
=====================================================

A fitted model is a measure-dependent map ``x -> T_mu(x)``: every point
attends to the input measure ``mu``. Nothing ties it to the number of points it
was trained with, so a user may condition it on a smaller or larger ensemble
than in training, and push any number of points through it with
:meth:`~sklearn_measattn.MeasureTransformerRegressor.transport`. How good is
the map at other sizes?

A model is trained on the matrix-inverse benchmark (Gaussian control, 2-D)
with measures of ``N = 64`` points. On held-out measures it is then given
contexts of ``n = 16`` to ``1024`` points of the input law and evaluated two
ways:

* ``predict(context)``: one output point per context point (``n`` points);
* ``transport(context, queries)``: a fixed query ensemble of 1024 other points
  of the input law, pushed through the map that the context defines. This
  separates the quality of the map from the size of the output ensemble.

Both are scored by the energy distance to a large sample (4096 points) of the
true target law; an independent sample of the target law of the same size as
the output (the *oracle*) gives the two-sample level a perfect map would score.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import load_benchmark, make_matrix_inverse, sample_target_law
from sklearn_measattn.metrics import energy_distance

N_TRAIN = 64
X_train, y_train = make_matrix_inverse(n_samples=384, n_points=N_TRAIN, tail="gaussian", random_state=0)
model = MeasureTransformerRegressor(
    kernel="log", d_model=32, n_heads=4, n_layers=2, dim_feedforward=64, lr=2e-3, batch_size=16, max_epochs=25,
    random_state=0,
).fit(X_train, y_train)

# Held-out measures: 2048 input points each (contexts and queries are disjoint
# parts of them) and 4096 points of each true target law.
test = load_benchmark("matrix_inverse", n_samples=32, n_points=2048, tail="gaussian", random_state=1)
X_test = test.data
reference = sample_target_law(test, n_points=4096, random_state=2)
queries = X_test[:, 1024:]

sizes = [16, 32, 64, 128, 256, 512, 1024]
rows = []
for n in sizes:
    context = X_test[:, :n]
    rows.append({
        "n": n,
        "predict": energy_distance(reference, model.predict(context)),
        "oracle_n": energy_distance(reference, sample_target_law(test, n_points=n, random_state=3)),
        "transport": energy_distance(reference, model.transport(context, queries)),
    })
oracle_queries = energy_distance(reference, sample_target_law(test, n_points=1024, random_state=4))
pooled = energy_distance(reference, y_train[np.random.default_rng(5).integers(len(y_train), size=32)])

print(f"trained on N = {N_TRAIN} points per measure; energy to the true target law (mean of 32 held-out measures)")
print(f"{'context n':>10} {'predict (n pts)':>16} {'oracle (n pts)':>15} {'transport (1024 pts)':>21}")
for r in rows:
    print(f"{r['n']:>10d} {r['predict']:>16.4f} {r['oracle_n']:>15.4f} {r['transport']:>21.4f}")
print(f"oracle with 1024 points: {oracle_queries:.4f}; a training target of another measure: {pooled:.4f}")

# %%
# Energy to the true target law against the context size. The dashed lines are
# what independent samples of the true law score (the floor of each curve), the
# dotted line what a target ensemble of *another* measure scores (no map).
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(sizes, [r["predict"] for r in rows], "o-", color="C0", label="predict(context): n output points")
ax.plot(sizes, [r["oracle_n"] for r in rows], "--", color="C0", lw=1, label="oracle, n points")
ax.plot(sizes, [r["transport"] for r in rows], "s-", color="C3", label="transport(context, 1024 queries)")
ax.axhline(oracle_queries, ls="--", color="C3", lw=1, label="oracle, 1024 points")
ax.axhline(pooled, ls=":", color="0.3", lw=1, label="another measure's target")
ax.axvline(N_TRAIN, color="0.7", lw=6, alpha=0.4, label=f"training size N = {N_TRAIN}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(sizes, [str(n) for n in sizes])
ax.minorticks_off()
ax.set_xlabel("context size n (points of the input measure)")
ax.set_ylabel("energy distance to the true target law")
ax.legend(fontsize=7)
fig.tight_layout()
plt.show()

# %%
# What to expect
# --------------
#
# Measured when this example was written (the printed table above reruns it):
#
# ======  ===============  ==============  =====================
# n       predict (n pts)  oracle (n pts)  transport (1024 pts)
# ======  ===============  ==============  =====================
# 16      0.0744           0.1400          0.0981
# 64      0.0183           0.0344          0.0262
# 256     0.0078           0.0094          0.0120
# 1024    0.0059           0.0026          0.0086
# ======  ===============  ==============  =====================
#
# (1024-point oracle 0.0020; another measure's target 0.157.)
#
# * ``predict`` returns ``n`` points, and up to a few hundred points its
#   distance is set by that size: it scores at or below an independent
#   ``n``-point sample of the true law. Beyond, the error of the map itself
#   (about 0.006 here) dominates and the curve flattens above the oracle.
# * ``transport`` shows the map: with a 16-point context it is much worse
#   (0.098, against 0.026 at the training size), because attention averages
#   over the context and an average over 16 points is noisy. Contexts larger
#   than in training do not break the map; they improve it (0.0086 at 16 times
#   the training size), since the averages only get less noisy.
# * So a model can be conditioned on a small forecast ensemble and push a large
#   one (or a grid) through its map, as long as the context is not much smaller
#   than the training ensembles: below about a quarter of the training size the
#   map degrades quickly. This is a Gaussian control with a model trained for a
#   few seconds; on heavy-tailed data the context also sets how far into the
#   tails the attention reaches, so measure it on your own data the same way.
