"""Scorer directions: every named measure scorer, used by GridSearchCV, picks the
right model, and a direction that would reward the wrong one is refused."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GridSearchCV

from sklearn_measattn.metrics import make_measure_scorer


class _Scaled(RegressorMixin, BaseEstimator):
    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y=None):
        return self

    def predict(self, X):
        return X * self.scale


@pytest.mark.parametrize("metric", ["spread_ratio", "energy", "wasserstein", "mmd", "sliced_wasserstein"])
def test_every_named_scorer_picks_the_right_model(metric):
    X = np.random.default_rng(1).normal(size=(9, 10, 2))
    y = 2.0 * X
    grid = GridSearchCV(_Scaled(), {"scale": [0.0, 0.01, 0.5, 2.0, 6.0, 50.0]},
                        scoring=make_measure_scorer(metric), cv=3).fit(X, y)
    assert grid.best_params_ == {"scale": 2.0}


@pytest.mark.parametrize("metric", ["spread_ratio", "energy"])
def test_a_direction_that_would_reward_the_wrong_model_is_refused(metric):
    with pytest.raises(ValueError, match="greater_is_better"):
        make_measure_scorer(metric, greater_is_better=True)
