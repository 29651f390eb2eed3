"""jaxselect in a scikit-learn Pipeline on a pandas DataFrame: Pima diabetes with Turney's test costs.

impute → sequence the feature groups and keep those within a budget chosen by cross-validation
(GroupSequencingRegressorCV: all folds in one jitted, vmapped call) → scale → logistic regression
on the kept columns; then the same pipeline at a fixed budget of 5 CAD (no blood test). Zeros that mean "not measured" (glucose, blood pressure, skin fold, insulin, BMI)
become NaN and are imputed; glucose and insulin are one blood test (one group, one cost). The column
names survive to ``get_feature_names_out``. Run: python examples/sklearn_pipeline_pima.py (about 25 s on
2 CPU cores, mostly compilation)
"""

import time

import numpy as np
import pandas as pd
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import jaxselect as js
from jaxselect.sklearn import GroupSequencingRegressor, GroupSequencingRegressorCV

MISSING_AS_ZERO = ["glucose", "blood_pressure", "skin_thickness", "insulin", "bmi"]


def load_pima_frame():
    data = js.datasets.load_pima()
    df = pd.DataFrame(data.X, columns=list(data.feature_names))
    df[MISSING_AS_ZERO] = df[MISSING_AS_ZERO].replace(0.0, np.nan)
    return df, pd.Series(data.y, name="diabetes"), data.groups, data.costs


def main():
    df, y, groups, costs = load_pima_frame()
    X_train, X_test, y_train, y_test = train_test_split(df, y, test_size=0.25, stratify=y, random_state=0)
    select = GroupSequencingRegressorCV(
        groups=groups, costs=costs, cv=StratifiedKFold(5, shuffle=True, random_state=0), rule="1se", l2=1e-3
    )
    pipe = make_pipeline(SimpleImputer(strategy="median"), select, StandardScaler(), LogisticRegression())
    pipe.set_output(transform="pandas")
    t0 = time.perf_counter()
    pipe.fit(X_train, y_train)
    seconds = time.perf_counter() - t0

    cv = select.cv_result_
    print(f"group order learned on the training rows: {[list(df.columns[groups == g]) for g in select.order_]}")
    print("held-out R² of the sequenced linear model by budget (CAD), mean ± std over 5 folds:")
    for b, m, s in zip(cv.grid, cv.mean, cv.std):
        mark = " <- best" if b == cv.best else (" <- chosen (1 s.e.)" if b == select.budget_ else "")
        print(f"  budget {b:6.2f}: {m:.3f} ± {s:.3f}{mark}")
    names = list(pipe[:-1].get_feature_names_out())
    spent = costs[np.unique(groups[select.get_support()])].sum()
    print(f"selected columns (budget {select.budget_:.2f} CAD, cost per patient {spent:.2f} CAD): {names}")
    print(f"test accuracy of the pipeline: {pipe.score(X_test, y_test):.3f} (fit in {seconds:.2f} s)")
    cheap = GroupSequencingRegressor(groups=groups, costs=costs, budget=5.0, l2=1e-3)
    cheap_pipe = make_pipeline(SimpleImputer(strategy="median"), cheap, StandardScaler(), LogisticRegression())
    cheap_pipe.set_output(transform="pandas").fit(X_train, y_train)
    print(
        f"budget 5.00 CAD: columns {list(cheap_pipe[:-1].get_feature_names_out())}, "
        f"test accuracy {cheap_pipe.score(X_test, y_test):.3f}"
    )
    full = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression()).fit(X_train, y_train)
    print(f"every test ({costs.sum():.2f} CAD): test accuracy {full.score(X_test, y_test):.3f}")


if __name__ == "__main__":
    main()
