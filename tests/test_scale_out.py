"""Scale-out: GridSearchCV over kernels on a real dask.distributed cluster."""

from __future__ import annotations

import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
joblib = pytest.importorskip("joblib")

from sklearn.model_selection import GridSearchCV, KFold  # noqa: E402

from sklearn_measattn import MeasureTransformerRegressor  # noqa: E402
from sklearn_measattn.datasets import make_matrix_inverse  # noqa: E402

GRID = {"kernel": ["log", "softmax"]}


@pytest.fixture(scope="module")
def one_epoch_params(seeded_tiny_params):
    """The seeded tiny regressor, trained one epoch."""
    return {**seeded_tiny_params, "max_epochs": 1}


def _search(n_jobs, params):
    return GridSearchCV(
        MeasureTransformerRegressor(**params),
        GRID,
        cv=KFold(2),
        scoring=None,  # MeasureTransformerRegressor.score: the negative energy distance
        n_jobs=n_jobs,
        error_score="raise",
        refit=False,
    )


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    # Dask sets OMP_NUM_THREADS=1 (and more) in this process's environment for its workers;
    # give the environment back, or every subprocess a later test starts runs on one thread.
    environment = dict(os.environ)
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=40,
        worker_dashboard_address=None,
    ) as cluster, Client(cluster) as client:
        yield cluster, client
    os.environ.clear()
    os.environ.update(environment)
    # Leaving the context managers closed the client and shut the cluster down.
    assert cluster.status.name in ("closed", "closing")


@pytest.mark.slow
def test_grid_search_over_kernels_on_dask_workers(cluster, one_epoch_params):
    from distributed import get_task_stream

    _, client = cluster
    X, y = make_matrix_inverse(n_samples=8, n_points=10, tail="student_t", tail_index=2.0, random_state=0)

    serial = _search(n_jobs=1, params=one_epoch_params).fit(X, y)

    with get_task_stream(client) as stream, joblib.parallel_backend("dask"):
        distributed_search = _search(n_jobs=-1, params=one_epoch_params).fit(X, y)

    # The search completed with every candidate scored, identically to the serial run.
    results = distributed_search.cv_results_
    assert [p["kernel"] for p in results["params"]] == GRID["kernel"]
    for key in ("mean_test_score", "split0_test_score", "split1_test_score"):
        assert np.all(np.isfinite(results[key]))
        np.testing.assert_allclose(results[key], serial.cv_results_[key], rtol=1e-6, atol=1e-9)
    assert list(results["rank_test_score"]) == list(serial.cv_results_["rank_test_score"])

    # The work really ran in the worker processes, not in this one.
    tasks = stream.data
    assert len(tasks) >= len(GRID["kernel"]) * 2, f"only {len(tasks)} tasks on the cluster"
    worker_addresses = set(client.scheduler_info()["workers"])
    assert {task["worker"] for task in tasks} <= worker_addresses
    worker_pids = set(client.run(os.getpid).values())
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids
