"""The DWSM policy's predictor for :func:`jaxselect.predict` (registered when :mod:`jaxselect.dwsm`
is imported): dense X only — its episodes read single entries of each datum."""

from __future__ import annotations

from jaxselect._predict import no_budget, no_link, predict, rows_on_axis
from jaxselect.design import is_sparse
from jaxselect.dwsm.policy import DWSMPolicy, dwsm_predict

__all__: list[str] = []


rows_on_axis(DWSMPolicy, lambda budget: 0)  # labels (m,), acquired (m, d): each datum's own episode


@predict.register(DWSMPolicy)
def _predict_dwsm(policy: DWSMPolicy, X, budget, link):
    if is_sparse(X):
        raise TypeError(
            "a DWSM policy does not predict on sparse X (its episodes read single entries of each datum): "
            "pass X.toarray(), or use a linear result (fsa, cs_omp, greedy_rls, ...) for sparse data"
        )
    no_budget(policy, budget, "a DWSM policy's hard budget is set at fit time (dwsm_fit(budget=B))")
    no_link(policy, link, "a DWSM policy predicts labels")
    return dwsm_predict(policy, X)
