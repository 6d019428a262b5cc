"""Benchmark: predict() and annotate with the TF-IDF model next to a plain scikit-learn pipeline.

1. Fits the shipped `baseline_tfidf` model (character 1-3 + kiwipiepy morpheme 1-2 n-gram TF-IDF,
   morphemes of each eojeol analysed alone (`analysis: word`, the default), one logistic
   regression per head, no context) on a synthetic Korean corpus (`--train-dialogues`),
   and the reference beside it: a plain scikit-learn char TF-IDF (`char_wb` 1-3, same min_df,
   max_features, sublinear tf) + one `LogisticRegression` per head, on the same sentences' final labels.
2. Draws `--sentences` other synthetic sentences (another seed; the count of distinct texts is printed:
   the synthetic corpus repeats itself more than real chat does) and, `--repeats` times, each time
   with an empty tokenisation cache (as on new text):
   - the reference: `vectorizer.transform(texts)` + `predict_proba` of every head;
   - `psyattrs.predict(texts, model)` through a loaded `Predictor` (the public API);
   - the model's own `predict_proba` (the features and the heads, without the output frame);
   - `psyattrs.serving.annotate.annotate` of the same sentences as an utterance-table Parquet file
     (one conversation per sentence, written to a Parquet dataset);
   - `psyattrs.predict` with the same config but `model.params.words=none` (character n-grams only,
     no morpheme analysis): the speed of the features the reference has;
   - `psyattrs.predict` with `model.params.analysis=sentence` (each sentence analysed whole by
     kiwipiepy, the analysis before `word` became the default, and that of models saved before).
3. Prints the median seconds, sentences per second and the ratio to the reference measured in the
   same run (aim, issue 10: predict and annotate at most 2x the reference), and where predict's time
   goes (normalisation, morpheme analysis, the two TF-IDF blocks, the heads), stage by stage as
   `TextFeaturizer.transform` runs them.

    .venv/bin/python benchmarks/predict_benchmark.py [--sentences 30000] [--repeats 3]

Synthetic data only (no file of ../shared/data is read).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py


def _reference(train: pd.DataFrame, params: dict):
    """The plain pipeline: char TF-IDF + one LogisticRegression per head on the final labels."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from psyattrs.data.table import final_column
    from psyattrs.schema import OPELA

    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=tuple(params["char_ngrams"]), min_df=params["min_df"],
                                 max_features=params["max_features"], sublinear_tf=params["sublinear_tf"],
                                 dtype=np.float32)
    keep = ~train["is_pause"].to_numpy()
    X = vectorizer.fit_transform(train["text"][keep].tolist())
    heads = []
    for head in OPELA:
        y = train[final_column(head.name)][keep].to_numpy(dtype=float, na_value=np.nan)
        rows = ~np.isnan(y)
        heads.append(LogisticRegression(C=params["C"], max_iter=1000, solver="newton-cg").fit(X[rows], y[rows].astype(int)))
    return vectorizer, heads


def _fit(train_dialogues: int, *, words: str = "auto", analysis: str | None = None):
    from psyattrs.synth import synthesize
    from psyattrs.experiments.config import load_config
    from psyattrs.labels.soft import mixed_targets
    from psyattrs.models.base import build_model
    from psyattrs.schema import OPELA

    config = load_config("baseline_tfidf")
    train = synthesize(train_dialogues, seed=7).utterances
    settings = config.model.settings(context_previous=config.context.previous, seed=config.seed)
    settings.update(calibration=None, tune_thresholds=False)
    settings["words"] = words
    if analysis is not None:
        settings["analysis"] = analysis
    model = build_model("tfidf", OPELA, **settings)
    model.fit(train, mixed_targets(train, OPELA, lam=1.0))
    return model, _reference(train, model.params), len(train)


def _sentences(n: int) -> list[str]:
    from psyattrs.synth import synthesize

    dialogues = max(1, n // 90)
    while True:
        table = synthesize(dialogues, seed=11).utterances
        texts = table.loc[~table["is_pause"].to_numpy(), "text"].tolist()
        if len(texts) >= n:
            return texts[:n]
        dialogues = int(dialogues * n / max(len(texts), 1)) + 1


def _median(fn, repeats: int) -> float:
    from psyattrs.features.tokenizers import clear_tokenizer_cache

    times = []
    for _ in range(repeats):
        clear_tokenizer_cache()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _breakdown(model, texts: list[str]) -> list[tuple[str, float]]:
    """Seconds of predict's stages on the texts, once, from an empty tokenisation cache, done as
    `TextFeaturizer.transform` does them (each distinct sentence once)."""
    from psyattrs.features.text import char_wb_transform, word_ngram_transform
    from psyattrs.features.tokenizers import clear_tokenizer_cache, normalize_distinct, tokenize

    featurizer = model.featurizer_
    language = featurizer._word_language()
    clear_tokenizer_cache()
    out = []
    start = time.perf_counter()
    distinct, _ = normalize_distinct(texts)
    out.append(("normalise (distinct sentences)", time.perf_counter() - start))
    start = time.perf_counter()
    tokens = tokenize(distinct, language, unit=featurizer.analysis)
    out.append((f"morpheme analysis (kiwipiepy, {featurizer.analysis})", time.perf_counter() - start))
    start = time.perf_counter()
    char_wb_transform(featurizer.char_vectorizer_, distinct)
    out.append(("char TF-IDF", time.perf_counter() - start))
    start = time.perf_counter()
    if featurizer.analysis == "word":
        word_ngram_transform(featurizer.word_vectorizer_, distinct, language)
    else:
        featurizer.word_vectorizer_.transform(tokens)
    out.append(("morpheme TF-IDF", time.perf_counter() - start))
    X = featurizer.transform(texts)
    start = time.perf_counter()
    for head in model.heads_.values():
        head.predict_proba(X)
    out.append(("six logistic regressions", time.perf_counter() - start))
    return out


DOCS_INTRO = '`predict()` and `annotate` with the TF-IDF model against a plain scikit-learn character TF-IDF + logistic regression on the same sentences.'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=30_000)
    parser.add_argument("--train-dialogues", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "sentences", "train_dialogues"))
    with docs_page("predict", "Prediction benchmark", write=write, intro=DOCS_INTRO):

        from psyattrs.serving.annotate import annotate
        from psyattrs.serving.predict import Predictor

        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
              f"Python {platform.python_version()}")
        start = time.perf_counter()
        model, (vectorizer, heads), n_train = _fit(args.train_dialogues)
        char_only = Predictor(_fit(args.train_dialogues, words="none")[0])
        whole = Predictor(_fit(args.train_dialogues, analysis="sentence")[0])
        texts = _sentences(args.sentences)
        print(f"fitted on {n_train:,} synthetic sentences in {time.perf_counter() - start:.1f} s; "
              f"predicting {len(texts):,} other synthetic sentences ({len(set(texts)):,} distinct); "
              f"median of {args.repeats}, each from an empty tokenisation cache\n")

        predictor = Predictor(model)
        predictor.predict(texts[:200])  # load kiwipiepy before timing
        whole.predict(texts[:200])

        def reference():
            X = vectorizer.transform(texts)
            for clf in heads:
                clf.predict_proba(X)

        table = pd.DataFrame({"doc_id": [f"s{i}" for i in range(1, len(texts) + 1)], "text": texts})
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "sentences.parquet"
            table.to_parquet(source)
            model_dir = Path(tmp) / "model"
            model.save(model_dir)
            runs = {
                "reference: char TF-IDF + LR (scikit-learn)": _median(reference, args.repeats),
                "psyattrs.predict(texts) via Predictor": _median(lambda: predictor.predict(texts), args.repeats),
                "model.predict_proba(table)": _median(lambda: model.predict_proba(table), args.repeats),
                "annotate(sentences.parquet)": _median(
                    lambda: annotate(source, predictor, Path(tmp) / "out", restart=True, progress=False), args.repeats),
                "psyattrs.predict, words=none (char only)": _median(lambda: char_only.predict(texts), args.repeats),
                "psyattrs.predict, analysis=sentence": _median(lambda: whole.predict(texts), args.repeats),
            }
        ref = runs["reference: char TF-IDF + LR (scikit-learn)"]
        header = f"{'what':<44}{'median s':>9}{'sentences/s':>13}{'x reference':>13}"
        print(header)
        print("-" * len(header))
        for name, seconds in runs.items():
            print(f"{name:<44}{seconds:>9.2f}{len(texts) / seconds:>13,.0f}{seconds / ref:>13.2f}")
        print("\nwhere predict's time goes (one pass, empty cache):")
        for name, seconds in _breakdown(model, texts):
            print(f"  {name:<34}{seconds:>7.2f} s")


if __name__ == "__main__":
    main()
