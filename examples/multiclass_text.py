"""Select k words for a five-topic text classifier: a vectoriser into multiclass FSA in a Pipeline.

One-vs-rest would give every topic its own k words; the multinomial (softmax) loss of
``FSAClassifier`` keeps ONE set of k words for the whole model — the words whose coefficient rows
(one coefficient per topic) are largest — which is what a user selecting a vocabulary asks for.

The documents are generated here (nothing to download): five topics, a 1 500-word vocabulary whose
frequencies follow Zipf's law, and per topic twelve words drawn more often (a few of them shared
by two topics). The pipeline starts from the text, as a user's would:

    TfidfVectorizer(sublinear_tf=True)  ->  FSAClassifier(k=30, l2=1e-3)

The vectoriser's output is a scipy CSR matrix; FSA runs on it without densifying. Printed: the
held-out accuracy (next to ``SelectKBest(chi2, 30)`` + multinomial logistic regression, the same
number of words), the selected words with the topic each one points to, and how many of them are
topic words.

Run: ``python examples/multiclass_text.py`` (about half a minute on 2 CPU cores).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.feature_selection import SelectKBest, chi2  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

from jaxselect.sklearn import FSAClassifier  # noqa: E402

TOPICS = ("sport", "finance", "science", "travel", "cooking")
VOCAB, N_DOCS, DOC_WORDS, TOPIC_WORDS, K = 1500, 1000, 60, 12, 30


def generate(seed: int = 0):
    """``(documents, labels, topic_words)``: Zipf background words plus each topic's own words."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i:04d}" for i in range(VOCAB)])
    background = 1.0 / np.arange(1, VOCAB + 1)
    background /= background.sum()
    own = {t: rng.choice(np.arange(100, VOCAB), TOPIC_WORDS, replace=False) for t in range(len(TOPICS))}
    own[1][:3] = own[0][:3]  # finance and sport share three words: only the others tell them apart
    docs, labels = [], rng.integers(0, len(TOPICS), N_DOCS)
    for label in labels:
        n_topic = rng.binomial(DOC_WORDS, 0.15)
        picked = np.concatenate([
            rng.choice(VOCAB, DOC_WORDS - n_topic, p=background),
            rng.choice(own[label], n_topic),
        ])
        docs.append(" ".join(words[picked]))
    topic_words = {}
    for t, js in own.items():
        for j in js:
            topic_words[words[j]] = "+".join(filter(None, [topic_words.get(words[j]), TOPICS[t]]))
    return docs, np.array(TOPICS)[labels], topic_words


def main():
    docs, y, topic_words = generate()
    train_docs, test_docs, y_train, y_test = train_test_split(docs, y, test_size=0.3, random_state=0, stratify=y)

    fsa = make_pipeline(TfidfVectorizer(sublinear_tf=True), FSAClassifier(k=K, l2=1e-3))
    fsa.fit(train_docs, y_train)
    kbest = make_pipeline(TfidfVectorizer(sublinear_tf=True), SelectKBest(chi2, k=K), LogisticRegression(max_iter=2000))
    kbest.fit(train_docs, y_train)
    print(f"held-out accuracy with {K} words, 5 topics: FSAClassifier {fsa.score(test_docs, y_test):.3f}, "
          f"SelectKBest(chi2) + LogisticRegression {kbest.score(test_docs, y_test):.3f}")

    vectorizer, clf = fsa[0], fsa[-1]
    names = vectorizer.get_feature_names_out()
    chosen = clf.get_support(indices=True)
    print(f"FSA kept {len(chosen)} words, one set for all topics (coef_ {clf.coef_.shape}):")
    for j in chosen:
        row = clf.coef_[:, j]
        topic = clf.classes_[int(np.argmax(row))]
        truth = topic_words.get(names[j], "-")
        print(f"  {names[j]}  points to {topic:8s} (generated as a word of: {truth})")
    hits = sum(names[j] in topic_words for j in chosen)
    print(f"{hits} of the {len(chosen)} selected words are topic words")


if __name__ == "__main__":
    main()
