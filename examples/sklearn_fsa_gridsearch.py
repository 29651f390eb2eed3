"""FSA inside GridSearchCV on the breast cancer data, side by side with L1-logistic selection and abess.

A ``Pipeline(StandardScaler, FSAClassifier)`` is tuned over k with ``GridSearchCV``; the selected
column names come out of ``get_feature_names_out``. Then, at equal k, three selectors are compared
on a held-out split: FSA (logistic loss), ``SelectFromModel(LogisticRegression(L1))`` keeping the k
largest |coefficients| followed by a logistic regression, and abess's best-subset logistic
regression where abess is installed. Times are of a second (warm) fit; FSA's first fit per k also
compiles. Run: python examples/sklearn_fsa_gridsearch.py [--full]  (default: fast sizes for CI, about
15 s on 2 CPU cores; ``--full`` is the comparison quoted in the docs, about 30 s)
"""

import argparse
import time

import numpy as np
import sklearn
from sklearn.datasets import load_breast_cancer
from sklearn.feature_selection import SelectFromModel
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from jaxselect.sklearn import FSAClassifier

try:
    from abess.linear import LogisticRegression as AbessLogistic
except ImportError:  # abess is optional (pip install abess)
    AbessLogistic = None


def l1_logistic(C=1.0):
    """L1 logistic regression (liblinear); scikit-learn 1.8 replaced penalty="l1" by l1_ratio=1."""
    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    style = {"l1_ratio": 1.0} if (major, minor) >= (1, 8) else {"penalty": "l1"}
    return LogisticRegression(C=C, solver="liblinear", **style)


def fit_time(make, X, y):
    """(fitted model, seconds of a second fit): the first fit warms caches (FSA compiles per k)."""
    make().fit(X, y)
    model = make()
    t0 = time.perf_counter()
    model.fit(X, y)
    return model, time.perf_counter() - t0


def main(full: bool = False):
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    ks = [2, 4, 8, 16] if full else [3, 6]
    n_iter = 300 if full else 100

    pipe = make_pipeline(StandardScaler(), FSAClassifier(n_iter=n_iter, l2=1e-3))
    search = GridSearchCV(pipe, {"fsaclassifier__k": ks}, cv=5 if full else 3)
    t0 = time.perf_counter()
    search.fit(X_train, y_train)
    seconds = time.perf_counter() - t0
    best = search.best_estimator_
    print(
        f"GridSearchCV over k = {ks}: mean CV accuracy {np.round(search.cv_results_['mean_test_score'], 3).tolist()}, "
        f"best k = {search.best_params_['fsaclassifier__k']} ({seconds:.1f} s)"
    )
    print(f"selected columns: {list(best.get_feature_names_out())}")
    print(f"test accuracy of the tuned pipeline: {best.score(X_test, y_test):.3f}")

    print("at equal k (test accuracy, seconds per warm fit):")
    print(f"  {'k':>3}  {'FSA':>14}  {'L1 SelectFromModel':>20}  {'abess':>14}")
    for k in ks:
        fsa_model, fsa_s = fit_time(
            lambda k=k: make_pipeline(StandardScaler(), FSAClassifier(k, n_iter=n_iter, l2=1e-3)), X_train, y_train
        )
        l1_model, l1_s = fit_time(
            lambda k=k: make_pipeline(
                StandardScaler(),
                SelectFromModel(l1_logistic(), max_features=k, threshold=-np.inf),
                LogisticRegression(),
            ),
            X_train,
            y_train,
        )
        row = f"  {k:>3}  {fsa_model.score(X_test, y_test):.3f} {fsa_s:6.3f}s  {l1_model.score(X_test, y_test):>12.3f} {l1_s:6.3f}s"
        if AbessLogistic is not None:
            ab_model, ab_s = fit_time(
                lambda k=k: make_pipeline(StandardScaler(), AbessLogistic(support_size=[k])), X_train, y_train
            )
            row += f"  {ab_model.score(X_test, y_test):.3f} {ab_s:6.3f}s"
        else:
            row += "  (abess not installed)"
        print(row)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="k in {2, 4, 8, 16}, 300 iterations, 5 folds")
    main(parser.parse_args().full)
