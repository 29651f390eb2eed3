"""Select words from text: a vectoriser into jaxselect's FSA classifier in a scikit-learn Pipeline.

DEXTER (bundled, ``jaxselect.datasets.load_dexter``) is a bag of words of Reuters documents about
corporate acquisitions: 300 documents, 20 000 word features. This example turns each row back into
a document ("w17 w17 w903 ...": every word id repeated as often as it occurs), so that the pipeline
starts from text, as a user's would:

    TfidfVectorizer(sublinear_tf=True, use_idf=False)  ->  FSAClassifier(k=93, l2=3.0)

The vectoriser's output, log(1 + counts) with rows scaled to unit L2 norm, is a scipy CSR matrix;
FSA works on it without densifying (centring and scaling are applied inside its products). The
selected words and the 5-fold cross-validated error are printed, next to scikit-learn's L1 logistic
regression in the same pipeline (its C set so that it keeps about as many words).
``benchmarks/bench_dexter.py`` runs the full comparison (repeated folds, both sizes of the FSA
paper's Table V, times).

Run: ``python examples/sparse_text.py`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jaxselect.datasets import load_dexter  # noqa: E402
from jaxselect.sklearn import FSAClassifier  # noqa: E402


def documents(X) -> list[str]:
    """Each row of a count matrix as a text: word id ``j`` written ``w{j}``, repeated count times."""
    X = np.asarray(X)
    docs = []
    for row in X:
        (idx,) = np.nonzero(row)
        docs.append(" ".join(" ".join([f"w{j}"] * int(row[j])) for j in idx))
    return docs


def l1_penalty() -> dict:
    """The L1 penalty, spelled for the installed scikit-learn (1.8 moved it to ``l1_ratio``)."""
    import sklearn

    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    return {"l1_ratio": 1.0} if (major, minor) >= (1, 8) else {"penalty": "l1"}


def main(k: int = 93, folds: int = 5) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline

    data = load_dexter()
    texts, y = documents(data.X), np.where(data.y > 0, "acquisition", "other")
    print(f"{len(texts)} documents, {len({w for t in texts for w in t.split()})} distinct words")

    def vectoriser():
        return TfidfVectorizer(sublinear_tf=True, use_idf=False, token_pattern=r"\S+")

    fsa = make_pipeline(vectoriser(), FSAClassifier(k=k, l2=1.0))
    cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    err = 1.0 - cross_val_score(fsa, texts, y, cv=cv)
    print(f"FSA, {k} words: {100 * err.mean():.1f} % error ({folds}-fold CV)")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # liblinear's convergence notes at large C
        l1 = make_pipeline(vectoriser(), LogisticRegression(solver="liblinear", C=150.0, **l1_penalty()))
        err = 1.0 - cross_val_score(l1, texts, y, cv=cv)
        n_words = int(np.sum(l1.fit(texts, y)[-1].coef_ != 0))
    print(f"L1 logistic, {n_words} words: {100 * err.mean():.1f} % error ({folds}-fold CV)")

    fsa.fit(texts, y)
    words = fsa[0].get_feature_names_out()[fsa[-1].get_support()]
    print("first selected words:", " ".join(sorted(words, key=lambda w: int(w[1:]))[:12]), "...")


if __name__ == "__main__":
    main()
