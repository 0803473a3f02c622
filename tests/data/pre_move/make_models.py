"""Fit tiny models at the commit before the package root was reorganised; pickle them and their predictions.

Run once, at that commit, with the output folder as argument (``pickled_names.txt`` was then
written from the pickles' ``pickle.find_class`` audit events, so that it includes the names that
the networks' nested torch pickles reference).
"""
import pickle
import pickletools
import sys
import tempfile
from pathlib import Path

import joblib
import numpy as np
from sklearn.preprocessing import StandardScaler

from sklearn_measattn import MeasureTransformerRegressor, save_model
from sklearn_measattn.datasets import make_matrix_inverse

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
X, y = make_matrix_inverse(n_samples=12, n_points=10, tail="pareto", tail_index=0.7, random_state=0)
Xt, _ = make_matrix_inverse(n_samples=4, n_points=9, tail="pareto", tail_index=0.7, random_state=1)
small = dict(d_model=8, n_heads=2, n_layers=1, dim_feedforward=8, max_epochs=2, batch_size=4, random_state=0)
ck = tempfile.mkdtemp()
configs = {
    "log_symlog": dict(kernel="log", transform="symlog"),
    "softmax_onecycle": dict(kernel="softmax", lr_schedule="onecycle"),
    "poly_learned_degree": dict(kernel="poly", kernel_params={"degree": "learn"}),
    "poly2_sliced": dict(kernel="poly", kernel_params={"degree": 2}, loss="sliced", loss_params={"n_projections": 8}),
    "sigmoid_context": dict(kernel="sigmoid", context_size=6),
    "softplus_prenorm_early": dict(kernel="softplus", norm="pre", early_stopping=True, patience=2, validation_fraction=0.25, dropout=0.1),
    "compact_scaler": dict(kernel="compact", transform=StandardScaler()),
    "sparsemax_checkpoint": dict(kernel="sparsemax", checkpoint_dir=ck),
    "log_sinkhorn": dict(kernel="log", loss="sinkhorn"),
    "softmax_mse": dict(kernel="softmax", loss="mse"),
}
names = set()
np.save(out / "X_test.npy", Xt)
for name, params in configs.items():
    Yt = np.asarray(y) if params.get("loss") != "mse" else y
    model = MeasureTransformerRegressor(**small, **params).fit(X, y)
    data = pickle.dumps(model)
    (out / f"{name}.pkl").write_bytes(data)
    joblib.dump(model, out / f"{name}.joblib")
    np.save(out / f"{name}_predict.npy", model.predict(Xt))
    np.save(out / f"{name}_transport.npy", model.transport(Xt, Xt[:, :3] * 0.5))
    ops = list(pickletools.genops(data))
    strings = []
    for op, arg, _ in ops:
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        if op.name == "STACK_GLOBAL":
            names.add(f"{strings[-2]}:{strings[-1]}")
        if op.name == "GLOBAL":
            names.add(arg.replace(" ", ":"))
    try:
        save_model(model, out / f"{name}.safetensors")
    except Exception as e:
        print(name, "not storable:", type(e).__name__)
ours = sorted(n for n in names if n.startswith("sklearn_measattn"))
(out / "pickled_names.txt").write_text(
    "# What pickles of fitted models referenced before the package root was reorganised, module:name per line.\n"
    + "\n".join(ours) + "\n")
print(len(ours), "names")
print("\n".join(ours))
