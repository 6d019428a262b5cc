"""Benchmark: which annotations to buy next, simulated on MD-Agreement's real annotations.

MD-Agreement (LeWiDi; tweets, five annotators each, 670 annotators in all) is replayed as an
annotation project. Per seed:

- seed set: 10% of the train items, one annotation each (a random one of the item's five);
- rounds: each strategy buys `--budget` single annotations (default: 10% of the train items), one
  per chosen item, revealing the next of that item's annotations in a fixed random order (an item
  with all five revealed is no longer a candidate); an item without annotations is "label new", one
  with some is "relabel";
- after each round the fast classical model is retrained on every item with an annotation, on the
  annotators' distribution so far (soft targets): TF-IDF features as `experiments/lewidi.yaml`
  (character 2-5-grams and word 1-2-grams; the vectoriser is fitted once on the train texts, which
  uses no label) and a logistic regression (C 1, liblinear, sample-weighted soft targets);
- scored on the official test split: soft cross-entropy against the five annotators'
  distribution (nats, lower is better) and macro-F1 of the hard label.

Strategies: psyattrs' `random`, `entropy`, `disagreement` and `combined`
(`psyattrs.labels.active.selection_scores`) and, as the reference, cleanlab's own ActiveLab
(`cleanlab.multiannotator.get_active_learning_scores` on the annotators' real ids). `combined`
and ActiveLab score labelled items with 3-fold cross-fitted probabilities (out-of-sample, as
ActiveLab asks); new items with the round's model.

Prints per strategy the learning curve (mean and standard deviation over seeds at each number of
annotations), and the aims: does the best psyattrs strategy reach random's final soft CE with at
most 70% of the annotations (interpolated linearly between rounds), and is it no worse than
ActiveLab at any budget (worse = a mean higher by more than the seeds' spread of the paired
difference). With two classes (MD-Agreement) `entropy` and `disagreement` rank items alike (both
are monotone in |p - 1/2|), so their curves coincide. Writes a learning-curve PNG
(`--plot`, default `active_benchmark.png` in the current folder); `--mlflow` logs the curves, the
table and the plot to an MLflow run (experiment `active-benchmark`).

The data are not part of the project: the default is `../shared/data/lewidi/` beside the checkout;
without it the script says so and exits 0.

    nice .venv/bin/python benchmarks/active_benchmark.py [FOLDER] [--seeds 3] [--rounds 6]
        [--budget N] [--quick] [--mlflow] [--plot FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "lewidi"
PSYATTRS = ("random", "entropy", "disagreement", "combined")
REFERENCE = "activelab (cleanlab)"
AIM_SHARE = 0.70
DOCS_INTRO = ("MD-Agreement's real annotations replayed as an annotation project: soft CE and macro-F1 on the official "
              "test split after each round of bought annotations, per selection strategy, with cleanlab's ActiveLab "
              "as the reference; whether the aims of issue 29 are met.")


# -------------------------------------------------------------------------------------- data


def load(folder: Path):
    from psyattrs.data import load_corpus

    train = load_corpus(folder / "MD-Agreement_train.json")
    test = load_corpus(folder / "MD-Agreement_test.json")
    return train, test


def item_annotations(corpus) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """Per train item (utterance order): its annotators' ids (as ints) and labels; the id names."""
    ann = corpus.annotations
    names = sorted(ann["annotator"].astype(str).unique())
    code = {n: i for i, n in enumerate(names)}
    grouped = ann.assign(a=ann["annotator"].astype(str).map(code)).groupby("sent_id", sort=False)
    who = grouped["a"].agg(list)
    what = grouped["label"].agg(list)
    sent = corpus.utterances["sent_id"].astype(str)
    return ([np.asarray(who.get(s, []), dtype=np.int64) for s in sent],
            [np.asarray(what.get(s, []), dtype=np.int64) for s in sent], names)


class Features:
    """TF-IDF of experiments/lewidi.yaml's n-grams, fitted once on the train texts (no labels)."""

    def __init__(self, train_texts, test_texts):
        from scipy.sparse import hstack
        from sklearn.feature_extraction.text import TfidfVectorizer

        char = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True)
        word = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        self.train = hstack([char.fit_transform(train_texts), word.fit_transform(train_texts)]).tocsr()
        self.test = hstack([char.transform(test_texts), word.transform(test_texts)]).tocsr()


def fit_predict(x_fit, soft: np.ndarray, x_pred_list: list, k: int) -> list[np.ndarray]:
    """Logistic regression on soft targets by sample-weighted expansion; predicts each matrix."""
    from scipy.sparse import vstack
    from sklearn.linear_model import LogisticRegression

    rows, labels = np.nonzero(soft > 0)
    model = LogisticRegression(C=1.0, solver="liblinear", max_iter=1000)
    model.fit(x_fit[rows], labels, sample_weight=soft[rows, labels])
    out = []
    for x in x_pred_list:
        p = np.zeros((x.shape[0], k))
        p[:, model.classes_] = model.predict_proba(x)
        out.append(p)
    return out


def cross_fitted(x, soft: np.ndarray, k: int, seed: int, folds: int = 3) -> np.ndarray:
    """Out-of-fold probabilities of the labelled items."""
    fold = np.random.default_rng(seed).permutation(len(soft)) % folds
    out = np.zeros((len(soft), k))
    for f in range(folds):
        held = fold == f
        out[held] = fit_predict(x[~held], soft[~held], [x[held]], k)[0]
    return out


# -------------------------------------------------------------------------------- simulation


class Project:
    """One seed's annotation project: which annotations of which items are revealed so far."""

    def __init__(self, who: list[np.ndarray], what: list[np.ndarray], k: int, n_annotators: int, seed: int,
                 seed_share: float):
        rng = np.random.default_rng(seed)
        self.order = [rng.permutation(len(w)) for w in who]
        self.who, self.what, self.k, self.n_annotators = who, what, k, n_annotators
        self.revealed = np.zeros(len(who), dtype=np.int64)
        first = rng.choice(np.flatnonzero([len(w) > 0 for w in who]), size=int(round(seed_share * len(who))),
                           replace=False)
        self.revealed[first] = 1

    @property
    def n_annotations(self) -> int:
        return int(self.revealed.sum())

    def candidates(self) -> np.ndarray:
        return np.flatnonzero(self.revealed < np.array([len(w) for w in self.who]))

    def counts(self) -> np.ndarray:
        out = np.zeros((len(self.who), self.k))
        for i in np.flatnonzero(self.revealed):
            np.add.at(out[i], self.what[i][self.order[i][: self.revealed[i]]], 1)
        return out

    def wide(self, rows: np.ndarray) -> np.ndarray:
        """Labels so far of `rows` as (len(rows), n_annotators), NaN where none."""
        out = np.full((len(rows), self.n_annotators), np.nan)
        for j, i in enumerate(rows):
            seen = self.order[i][: self.revealed[i]]
            out[j, self.who[i][seen]] = self.what[i][seen]
        return out

    def buy(self, items: np.ndarray) -> None:
        self.revealed[items] += 1


def choose(strategy: str, project: Project, feats: Features, proba_all: np.ndarray, budget: int, seed: int
           ) -> np.ndarray:
    """The `budget` candidate items the strategy buys an annotation for."""
    from psyattrs.labels.active import activelab, selection_scores

    cand = project.candidates()
    budget = min(budget, len(cand))
    if strategy == "random":
        return np.random.default_rng(seed).choice(cand, size=budget, replace=False)
    proba = proba_all[cand].copy()
    labelled = cand[project.revealed[cand] > 0]
    needs_oof = strategy in ("combined", REFERENCE)
    if needs_oof:  # out-of-sample probabilities for every labelled item (the model trained on them)
        all_labelled = np.flatnonzero(project.revealed > 0)
        counts = project.counts()[all_labelled]
        oof = cross_fitted(feats.train[all_labelled], counts / counts.sum(axis=1, keepdims=True), project.k, seed)
        pos = {i: j for j, i in enumerate(all_labelled)}
        proba[project.revealed[cand] > 0] = oof[[pos[i] for i in labelled]]
    if strategy == REFERENCE:
        wide = project.wide(cand)
        score = -activelab(proba, wide)  # cleanlab: lower = more informative
    else:
        name = strategy
        labels = project.wide(cand) if strategy == "combined" else np.zeros((len(cand), 0))
        score = selection_scores({"h": proba}, {"h": labels}, strategy=name, seed=seed)["score"].to_numpy()
    tie = np.random.default_rng(seed).random(len(cand))
    return cand[np.lexsort((tie, -score))[:budget]]


def evaluate(proba: np.ndarray, test_table, head) -> dict[str, float]:
    from psyattrs.experiments import metrics as M

    m = M.score_head(test_table, head, proba, proba.argmax(axis=1))
    return {"soft_ce": float(m["soft_ce"]), "macro_f1": float(m["macro_f1"])}


def simulate(strategy: str, seed: int, data: dict, rounds: int, budget: int, seed_share: float) -> list[dict]:
    project = Project(data["who"], data["what"], data["k"], data["n_annotators"], seed, seed_share)
    feats, k = data["feats"], data["k"]
    curve = []
    for r in range(rounds + 1):
        labelled = np.flatnonzero(project.revealed > 0)
        counts = project.counts()[labelled]
        proba_train, proba_test = fit_predict(feats.train[labelled], counts / counts.sum(axis=1, keepdims=True),
                                              [feats.train, feats.test], k)
        curve.append({"round": r, "annotations": project.n_annotations, "items": len(labelled),
                      **evaluate(proba_test, data["test_table"], data["head"])})
        if r < rounds:
            project.buy(choose(strategy, project, feats, proba_train, budget, seed * 1000 + r))
    return curve


# ----------------------------------------------------------------------------------- report


def summarise(curves: dict[str, list[list[dict]]]) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for name, runs in curves.items():
        ce = np.array([[p["soft_ce"] for p in run] for run in runs])
        f1 = np.array([[p["macro_f1"] for p in run] for run in runs])
        out[name] = {"annotations": np.array([p["annotations"] for p in runs[0]]), "ce": ce, "f1": f1}
    return out


def curve_table(summary) -> str:
    names = list(summary)
    steps = summary[names[0]]["annotations"]
    head = f"{'annotations':>11} " + " ".join(f"{n[:22]:>24}" for n in names)
    lines = ["soft CE on the test split (mean ± sd over seeds; lower is better)", head]
    for i, a in enumerate(steps):
        cells = [f"{summary[n]['ce'][:, i].mean():>13.4f} ± {summary[n]['ce'][:, i].std():.4f}" for n in names]
        lines.append(f"{a:>11} " + " ".join(f"{c:>24}" for c in cells))
    lines += ["", "macro-F1 on the test split (mean ± sd)", head]
    for i, a in enumerate(steps):
        cells = [f"{summary[n]['f1'][:, i].mean():>13.4f} ± {summary[n]['f1'][:, i].std():.4f}" for n in names]
        lines.append(f"{a:>11} " + " ".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def crossing(steps: np.ndarray, mean: np.ndarray, target: float) -> float:
    """The number of annotations at which a mean curve first reaches `target`, interpolated
    linearly between the two rounds around the crossing; NaN when it never does."""
    reached = np.flatnonzero(mean <= target)
    if not len(reached):
        return float("nan")
    i = reached[0]
    if i == 0 or mean[i] == mean[i - 1]:
        return float(steps[i])
    frac = (mean[i - 1] - target) / (mean[i - 1] - mean[i])
    return float(steps[i - 1] + frac * (steps[i] - steps[i - 1]))


def aims(summary) -> tuple[str, dict[str, float]]:
    """The two aims, in words and as numbers."""
    steps = summary["random"]["annotations"]
    target = summary["random"]["ce"][:, -1].mean()
    lines, numbers = [f"random's final soft CE: {target:.4f} with {steps[-1]} annotations"], {}
    best, best_area = None, np.inf
    for name in PSYATTRS:
        mean = summary[name]["ce"].mean(axis=0)
        share = crossing(steps, mean, target) / steps[-1]
        numbers[f"share_to_random_final_{name}"] = share
        lines.append(f"  {name:<13} reaches it with {'-' if np.isnan(share) else f'{100 * share:.0f}%'} of the annotations"
                     f"{' (not within the rounds)' if np.isnan(share) else ''}")
        area = mean[1:].mean()
        if name != "random" and area < best_area:
            best, best_area = name, area
    share = numbers[f"share_to_random_final_{best}"]
    ok1 = not np.isnan(share) and share <= AIM_SHARE
    diff = summary[best]["ce"] - summary[REFERENCE]["ce"]  # seeds x steps, paired by seed
    worse = [(int(steps[i]), float(diff[:, i].mean()), float(diff[:, i].std()))
             for i in range(1, diff.shape[1]) if diff[:, i].mean() > max(diff[:, i].std(), 1e-4)]
    lines.append(f"best psyattrs strategy (lowest mean soft CE over the rounds): {best}")
    lines.append(f"  aim 1 (random's final soft CE with <= {AIM_SHARE:.0%} of the annotations): "
                 f"{'MET' if ok1 else 'NOT MET'} ({'-' if np.isnan(share) else f'{100 * share:.0f}%'})")
    lines.append(f"  aim 2 (no worse than ActiveLab at any budget): {'MET' if not worse else 'NOT MET'}"
                 + ("" if not worse else "; worse at " + ", ".join(f"{a} (+{m:.4f} ± {s:.4f})" for a, m, s in worse)))
    numbers.update({"aim_share_met": float(ok1), "aim_activelab_met": float(not worse),
                    "max_ce_minus_activelab": float(diff[:, 1:].mean(axis=0).max())})
    return "\n".join(lines), numbers


def plot(summary, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, s in summary.items():
        for ax, key in zip(axes, ("ce", "f1")):
            m, sd = s[key].mean(axis=0), s[key].std(axis=0)
            ax.plot(s["annotations"], m, marker="o", ms=3, label=name, ls="--" if name == REFERENCE else "-")
            ax.fill_between(s["annotations"], m - sd, m + sd, alpha=0.15)
    axes[0].set(xlabel="annotations bought", ylabel="soft cross-entropy (test)", title="MD-Agreement: soft CE")
    axes[1].set(xlabel="annotations bought", ylabel="macro-F1 (test)", title="MD-Agreement: macro-F1")
    axes[0].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def log_mlflow(summary, table: str, verdict: str, numbers: dict, plot_path: Path, params: dict) -> str:
    import mlflow

    from psyattrs.experiments.store import ensure_experiment, quiet_mlflow, tracking_store

    with tracking_store(None) as uri, quiet_mlflow():
        experiment = ensure_experiment("active-benchmark", uri)
        with mlflow.start_run(experiment_id=experiment, run_name="active-benchmark") as run:
            mlflow.log_params(params)
            for name, s in summary.items():
                key = name.split(" ")[0]
                for i, a in enumerate(s["annotations"]):
                    mlflow.log_metric(f"soft_ce_{key}", float(s["ce"][:, i].mean()), step=int(a))
                    mlflow.log_metric(f"macro_f1_{key}", float(s["f1"][:, i].mean()), step=int(a))
            mlflow.log_metrics(numbers)
            mlflow.log_text(table + "\n\n" + verdict + "\n", "active_benchmark.txt")
            mlflow.log_artifact(str(plot_path))
            return run.info.run_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="folder with MD-Agreement_*.json")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--budget", type=int, default=None, help="annotations per round (default: 10%% of train items)")
    parser.add_argument("--seed-share", type=float, default=0.10, help="share of train items in the seed set")
    parser.add_argument("--quick", action="store_true", help="2 seeds, 3 rounds, a third of the train items")
    parser.add_argument("--mlflow", action="store_true", help="log to MLflow (experiment active-benchmark)")
    parser.add_argument("--plot", type=Path, default=Path("active_benchmark.png"))
    add_docs_option(parser)
    args = parser.parse_args(argv)
    partial = changed(parser, args, "data", "seeds", "rounds", "budget", "seed_share", "quick")
    with docs_page("active", "Active learning benchmark", write=wants_docs(args, partial=partial), intro=DOCS_INTRO):
        return run(args)


def run(args: argparse.Namespace) -> int:
    files = [args.data / f"MD-Agreement_{p}.json" for p in ("train", "test")]
    if not all(f.is_file() for f in files):
        print(f"skipped: MD-Agreement not found in {args.data} (need MD-Agreement_train.json and _test.json)")
        return 0
    t0 = time.perf_counter()
    train, test = load(args.data)
    who, what, names = item_annotations(train)
    texts = train.utterances["text"].astype(str).to_list()
    if args.quick:
        keep = np.random.default_rng(0).permutation(len(who))[: len(who) // 3]
        who, what, texts = [who[i] for i in keep], [what[i] for i in keep], [texts[i] for i in keep]
        args.seeds, args.rounds = 2, 3
    head = train.schema.heads[0]
    budget = args.budget or int(round(0.10 * len(who)))
    data = {"who": who, "what": what, "k": head.n_classes, "n_annotators": len(names), "head": head,
            "feats": Features(texts, test.utterances["text"].astype(str)), "test_table": test.utterances}
    print(f"MD-Agreement: {len(who)} train items, {sum(len(w) for w in who)} annotations by {len(names)} annotators; "
          f"{len(test.utterances)} test items. Seed {args.seed_share:.0%} of items x 1 annotation, {args.rounds} rounds "
          f"of {budget} annotations, {args.seeds} seeds{' (quick)' if args.quick else ''}", flush=True)
    curves: dict[str, list[list[dict]]] = {}
    for name in (*PSYATTRS, REFERENCE):
        start = time.perf_counter()
        curves[name] = [simulate(name, s, data, args.rounds, budget, args.seed_share) for s in range(args.seeds)]
        print(f"  {name}: {time.perf_counter() - start:.0f} s", flush=True)
    summary = summarise(curves)
    table = curve_table(summary)
    verdict, numbers = aims(summary)
    print()
    print(table)
    print()
    print(verdict)
    plot(summary, args.plot)
    print(f"\nplot: {args.plot}; {time.perf_counter() - t0:.0f} s in all")
    if args.mlflow:
        params = {"seeds": args.seeds, "rounds": args.rounds, "budget": budget, "seed_share": args.seed_share,
                  "quick": args.quick, "train_items": len(who)}
        print(f"logged to MLflow run {log_mlflow(summary, table, verdict, numbers, args.plot, params)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
