"""Cross-speaker coherence: does the next speaker's first line answer the last line before it?

A reply answers what came before it: a question and its answer share words and morphemes, an
answer echoes the topic, a greeting is greeted back, thanks and apologies are answered, laughter
follows a joke. `CoherenceModel` scores every pair (last line of one speaker, first line of the
other) of a conversation with a logistic regression on features that need no external model
(`pair_features`): rarity-weighted overlap of character bigrams, word stems and words, an echo of
a rare word, the content morphemes both lines hold (kiwipiepy's nouns, verb and adjective stems,
roots: `content_morphemes`, through the project's cached tokenizer), a question followed by a
non-question, greeting / closing / thanks / apology /
laughter lexicons on either side, and the lengths. It is learnt from the aligner's posteriors (at
each persona or user state of the DP, whether the other speaker came next), cross-fitted over
conversations like the sentence classifier, and enters the DP on each speaker change
(`psyattrs.align.lattice.Lattice.persona_user`).

What enters is, by default (`pair_only`), the pair terms' share of the model's log-odds: the
features of both lines together (overlaps, the echo, a question then an answer, a greeting greeted
back, thanks answered, ...), with the features of one line alone (`ONE_SIDED`: its length, whether
it is a question, its lexicons) held at their mean. Those say where a speaker's run ends, which the
run model (`psyattrs.align.priors.RunModel`) already scores from the same lines and the same
posteriors; counted in both, that evidence weighed twice, and the model hardly learnt the pair: on
the 135 real rows its largest weights were the last line's length (0.54) and question mark (0.42),
the overlaps' under 0.1. Not quite all of it goes: a question then an answer and a question then
a question add up to the last line being a question, so those two still carry part of its weight
(0.37 and 0.14 with the one-sided terms fitted beside them). With `pair_only=False` (ALIGN_VERSION
4) the change scores the whole log P(change | both lines) against the corpus rate.

scikit-learn is imported inside `fit`.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import scipy.sparse as sp

from psyattrs.align.sentvec import sentence_vectors
from psyattrs.features.tokenizers import normalize_texts, tokenize, word_tokenizer

_WORD = re.compile(r"\w+")
QUESTION_ENDINGS = ("까", "까요", "나요", "니", "냐", "죠", "지요", "어때", "뭐", "뭐야", "뭐에요", "뭐예요", "래", "을까", "ㄹ까", "가요", "세요")
LEXICONS: dict[str, tuple[str, ...]] = {
    "greet": ("안녕", "반가", "하이", "hi", "hello", "처음 뵙"),
    "close": ("잘자", "잘 자", "다음에", "또 봐", "또봐", "안녕히", "바이", "빠이", "나중에", "좋은 밤", "굿밤", "수고"),
    "thanks": ("고마", "감사", "땡큐", "고맙"),
    "sorry": ("미안", "죄송", "늦었", "늦게"),
    "laugh": ("ㅋㅋ", "ㅎㅎ", "하하", "헤헤", "ㅋ"),
    "agree": ("네", "응", "그래", "맞아", "맞아요", "좋아", "좋아요", "그럼"),
}
"""Phrases whose presence on either side of a speaker change says something about the change."""

FEATURES = (
    "bias", "bigram_overlap", "stem_overlap", "word_overlap", "rare_echo", "morph_overlap", "morph_echo", "morph_rare",
    "q_then_answer", "q_then_q",
    "a_question", "b_question", "a_len", "b_len", "both_greet", "both_close", "thanks_answer",
    "sorry_answer", "laugh_after", "b_agree_after_q",
    *(f"a_{k}" for k in LEXICONS), *(f"b_{k}" for k in LEXICONS),
)  # fmt: skip
ONE_SIDED = (
    "bias", "a_question", "b_question", "a_len", "b_len", *(f"a_{k}" for k in LEXICONS), *(f"b_{k}" for k in LEXICONS),
)  # fmt: skip
"""The features of one line alone: where a run ends, not whether the reply fits (`CoherenceModel`'s
`pair_only`)."""
USE_FEATURE = "use_cosine"
"""The cosine of the two lines' USE sentence vectors (`psyattrs.align.sentvec`): a column after
`FEATURES`, present only when the model is given the vectors (`CoherenceModel`'s `use`)."""
PAIR_FEATURES = (*(n for n in FEATURES if n not in ONE_SIDED), USE_FEATURE)
"""The features `CoherenceModel`'s `only` may keep (the pair terms; the one-sided ones always stay)."""
CONTENT_TAGS = ("NNG", "NNP", "NR", "SN", "SL", "SH", "XR", "VV", "VA", "MAG")
"""The kiwipiepy tags of the morphemes whose echo says a reply picks up a topic: nouns, numbers,
foreign words, roots, verb and adjective stems, adverbs (not endings, particles or punctuation)."""


def is_question(line: str) -> bool:
    s = line.strip().rstrip(".~!^ㅎㅋㅠㅜ ")
    if "?" in line:
        return True
    last = s.split()[-1] if s.split() else ""
    return any(last.endswith(e) for e in QUESTION_ENDINGS)


class _Vocab:
    """Inverse document frequencies of the tokens of a corpus's lines."""

    def __init__(self, token_lists: list[list[str]]):
        df = Counter(t for toks in token_lists for t in set(toks))
        n = max(1, len(token_lists))
        self.index = {t: k for k, t in enumerate(df)}
        self.idf = np.array([np.log((n + 1) / (df[t] + 1)) + 1.0 for t in df], dtype=float)

    def matrix(self, token_lists: list[list[str]], weighted: bool = True, min_idf: float = 0.0) -> sp.csr_matrix:
        rows, cols = [], []
        for r, toks in enumerate(token_lists):
            for k in {self.index[t] for t in toks if t in self.index}:
                if self.idf[k] >= min_idf:
                    rows.append(r)
                    cols.append(k)
        vals = self.idf[cols] if weighted else np.ones(len(cols))
        return sp.csr_matrix((vals, (rows, cols)), shape=(len(token_lists), len(self.idf)))


def content_morphemes(lines: list[str], language: str) -> list[list[str]]:
    """Per line, its content morphemes (`CONTENT_TAGS`) as `form/TAG`, from the project's cached
    tokenizer (`psyattrs.features.tokenizers.tokenize`); for a language other than `ko`, its word
    tokens of two or more characters (no tags to filter on)."""
    kind = word_tokenizer(language)
    tokens = tokenize(normalize_texts(lines), kind)
    if kind != "ko":
        return [[t for t in toks if len(t) >= 2] for toks in tokens]
    return [[t for t in toks if t.rpartition("/")[2].split("-")[0] in CONTENT_TAGS] for toks in tokens]


def _tokens(line: str) -> tuple[list[str], list[str], list[str]]:
    words = _WORD.findall(line.lower())
    bigrams = [w[k : k + 2] for w in words for k in range(len(w) - 1)]
    stems = [w[:2] for w in words if len(w) >= 2]
    return words, bigrams, stems


class PairFeaturizer:
    """`pair_features` for the lines of one corpus (idf statistics from all of its lines).

    Args:
        lines: every line of the corpus (the rarity statistics).
        language: the corpus's language code, for the morpheme features (`content_morphemes`);
            None leaves them at 0.
        vectors: {line: its unit-length sentence vector} (`psyattrs.align.sentvec.sentence_vectors`):
            adds `USE_FEATURE` after `FEATURES`, the cosine of the two lines' vectors (a line
            without one: 0); None: `FEATURES` only.
    """

    def __init__(self, lines: list[str], language: str | None = None, vectors: dict[str, np.ndarray] | None = None):
        self.vectors = vectors
        self.names = (*FEATURES, USE_FEATURE) if vectors is not None else FEATURES
        toks = [_tokens(x) for x in lines]
        self.vocabs = [_Vocab([t[k] for t in toks]) for k in range(3)]
        rare = np.quantile(self.vocabs[0].idf, 0.5) if len(self.vocabs[0].idf) else 0.0
        self.rare_idf = float(rare)
        self.language = language
        self.morphs, self._morphemes = None, {}
        if language is not None:
            morphemes = content_morphemes(lines, language)
            self.morphs, self._morphemes = _Vocab(morphemes), dict(zip(lines, morphemes))

    def _content(self, lines: list[str]) -> list[list[str]]:
        """`content_morphemes` of lines, those of the corpus's lines as computed at construction."""
        missing = [x for x in dict.fromkeys(lines) if x not in self._morphemes]
        if missing:
            self._morphemes.update(zip(missing, content_morphemes(missing, self.language)))
        return [self._morphemes[x] for x in lines]

    def features(self, left: list[str], right: list[str]) -> np.ndarray:
        """(len(left), len(right), len(self.names)) float32: every pair (left line, right line)."""
        a_t, b_t = [_tokens(x) for x in left], [_tokens(x) for x in right]
        out = np.zeros((len(left), len(right), len(self.names)), dtype=np.float32)
        if not left or not right:
            return out
        if self.vectors is not None:
            out[..., len(FEATURES)] = self._vectors(left) @ self._vectors(right).T
        f = {name: k for k, name in enumerate(FEATURES)}
        out[..., f["bias"]] = 1.0
        norm = np.sqrt(np.outer([len(t[1]) + 1 for t in a_t], [len(t[1]) + 1 for t in b_t]))
        for k, name in ((1, "bigram_overlap"), (2, "stem_overlap"), (0, "word_overlap")):
            v = self.vocabs[k]
            A, B = v.matrix([t[k] for t in a_t]), v.matrix([t[k] for t in b_t], weighted=False)
            ov = (A @ B.T).toarray()
            out[..., f[name]] = np.log1p(ov / norm * 4) if k == 1 else np.log1p(ov)
        v = self.vocabs[0]
        A = v.matrix([t[0] for t in a_t], weighted=False, min_idf=self.rare_idf)
        B = v.matrix([t[0] for t in b_t], weighted=False, min_idf=self.rare_idf)
        out[..., f["rare_echo"]] = np.minimum((A @ B.T).toarray(), 3.0)
        if self.morphs is not None:  # shared content morphemes: their rarity summed, any, the rarest
            A = self.morphs.matrix(self._content(left), weighted=False)
            B = self.morphs.matrix(self._content(right), weighted=False)
            out[..., f["morph_overlap"]] = np.log1p((A.multiply(self.morphs.idf[None, :]).tocsr() @ B.T).toarray())
            out[..., f["morph_rare"]] = _rarest_shared(A, B, self.morphs.idf)
            out[..., f["morph_echo"]] = out[..., f["morph_rare"]] > 0  # every idf is at least 1
        qa = np.array([is_question(x) for x in left], dtype=np.float32)
        qb = np.array([is_question(x) for x in right], dtype=np.float32)
        out[..., f["a_question"]] = qa[:, None]
        out[..., f["b_question"]] = qb[None, :]
        out[..., f["q_then_answer"]] = np.outer(qa, 1 - qb)
        out[..., f["q_then_q"]] = np.outer(qa, qb)
        out[..., f["a_len"]] = np.log1p([len(x) for x in left])[:, None]
        out[..., f["b_len"]] = np.log1p([len(x) for x in right])[None, :]
        lex_a = {k: np.array([any(w in x.lower() for w in ws) for x in left], dtype=np.float32) for k, ws in LEXICONS.items()}
        lex_b = {k: np.array([any(w in x.lower() for w in ws) for x in right], dtype=np.float32) for k, ws in LEXICONS.items()}
        for k in LEXICONS:
            out[..., f[f"a_{k}"]] = lex_a[k][:, None]
            out[..., f[f"b_{k}"]] = lex_b[k][None, :]
        out[..., f["both_greet"]] = np.outer(lex_a["greet"], lex_b["greet"])
        out[..., f["both_close"]] = np.outer(lex_a["close"], lex_b["close"])
        out[..., f["thanks_answer"]] = np.outer(lex_a["thanks"], 1 - lex_b["thanks"])
        out[..., f["sorry_answer"]] = np.outer(lex_a["sorry"], 1 - lex_b["sorry"])
        out[..., f["laugh_after"]] = np.outer(1 - lex_a["laugh"], lex_b["laugh"])
        out[..., f["b_agree_after_q"]] = np.outer(qa, lex_b["agree"])
        return out


    def _vectors(self, lines: list[str]) -> np.ndarray:
        """(len(lines), dim): each line's sentence vector, zeros for a line without one."""
        dim = len(next(iter(self.vectors.values()))) if self.vectors else 1
        zero = np.zeros(dim, dtype=np.float32)
        return np.array([self.vectors.get(x, zero) for x in lines], dtype=np.float32).reshape(len(lines), dim)


def _rarest_shared(A: sp.csr_matrix, B: sp.csr_matrix, idf: np.ndarray) -> np.ndarray:
    """(rows of A, rows of B): the largest idf of a token both rows hold (0: none)."""
    cols = np.intersect1d(A.indices, B.indices)
    if not len(cols):
        return np.zeros((A.shape[0], B.shape[0]))
    a, b = A[:, cols].toarray() > 0, B[:, cols].toarray() > 0
    return np.max(np.where(a[:, None, :] & b[None, :, :], idf[cols], 0.0), axis=2)


class CoherenceModel:
    """P(the other speaker comes next | a speaker's state, the two lines at the change), per pair.

    Args:
        persona: per conversation, its non-blank persona lines; user: its non-blank user lines.
        fold: (n_conversations,) cross-fitting fold of each conversation.
        pair_only: score each pair by its pair terms only (module docstring): the logit share of
            the features that are not `ONE_SIDED`, centred on the training pairs' mean; else
            log P(change | pair) - log(the corpus rate).
        language: the corpus's language code: the morpheme features (`PairFeaturizer`); None
            leaves them out.
        use: add `USE_FEATURE`, the cosine of the two lines' USE sentence vectors
            (`psyattrs.align.sentvec.sentence_vectors`, embedded once per corpus and cached).
        only: keep only these pair features (`PAIR_FEATURES`) beside the one-sided ones (empty:
            all of them): to measure one source of evidence alone.
        progress: the embedding's progress bar on a terminal, its lines on standard error otherwise.

    Pairs are indexed by non-blank line: `persona_user[c][a, b]` is the score of persona line a
    followed by user line b, `user_persona[c][b, a]` of user line b followed by persona line a.
    """

    def __init__(self, persona: list[list[str]], user: list[list[str]], fold: np.ndarray, pair_only: bool = True,
                 language: str | None = None, use: bool = False, only: tuple[str, ...] = (), progress: bool = True):
        self.pair_only = pair_only
        self.fold = np.asarray(fold, dtype=np.int64)
        self.n_folds = int(self.fold.max()) + 1 if len(self.fold) else 1
        lines = [x for lines in persona + user for x in lines]
        allowed = PAIR_FEATURES if use else PAIR_FEATURES[:-1]
        unknown = sorted(set(only) - set(allowed))
        if unknown:
            raise ValueError(f"coherence features {unknown} cannot be kept: not among {list(allowed)}")
        feat = PairFeaturizer(lines, language, sentence_vectors(lines, progress=progress) if use else None)
        self.names = feat.names
        keep = [k for k, n in enumerate(feat.names) if not only or n in ONE_SIDED or n in only]
        if len(keep) < len(feat.names):
            self.names = tuple(feat.names[k] for k in keep)
        self.X = [(feat.features(p, u), feat.features(u, p)) for p, u in zip(persona, user)]
        if len(keep) < len(feat.names):
            self.X = [(a[..., keep], b[..., keep]) for a, b in self.X]
        self.scores = [(np.zeros(x[0].shape[:2]), np.zeros(x[1].shape[:2])) for x in self.X]
        self.fitted = False
        self.coef: dict[str, float] = {}

    def fit(self, events: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None]) -> None:
        """Learns from per conversation (persona->user changes, persona states, user->persona
        changes, user states), each indexed like `X`'s pairs (None: no posterior)."""
        from sklearn.linear_model import LogisticRegression

        rows_x, rows_y, rows_w, rows_f, rows_d, idx = [], [], [], [], [], []
        for c, ev in enumerate(events):
            if ev is None:
                continue
            for d, (change, at) in enumerate(((ev[0], ev[1]), (ev[2], ev[3]))):
                sel = at > 1e-3
                if not sel.any():
                    continue
                X = self.X[c][d][sel]
                pos = np.clip(change[sel], 0.0, None)
                neg = np.clip(at[sel] - pos, 0.0, None)
                rows_x.append(np.hstack([X, X * d]))
                rows_y.append(pos)
                rows_w.append(neg)
                rows_f.append(np.full(len(X), self.fold[c]))
                rows_d.append(np.full(len(X), d))
        if not rows_x:
            return
        X = np.vstack(rows_x).astype(float)
        pos, neg, fold = np.concatenate(rows_y), np.concatenate(rows_w), np.concatenate(rows_f)
        if pos.sum() < 1.0 or neg.sum() < 1.0:
            return
        mu, sd = X.mean(axis=0), X.std(axis=0)
        sd[sd == 0] = 1.0
        self.base = float(pos.sum() / (pos.sum() + neg.sum()))
        models = {}
        for f in range(self.n_folds):
            train = fold != f if self.n_folds > 1 else np.ones(len(fold), dtype=bool)
            if pos[train].sum() < 1.0 or neg[train].sum() < 1.0:
                continue
            Xt = (X[train] - mu) / sd
            y = np.r_[np.ones(len(Xt)), np.zeros(len(Xt))]
            w = np.r_[pos[train], neg[train]]
            keep = w > 1e-4
            model = LogisticRegression(C=0.3, max_iter=300, tol=1e-4)
            model.fit(np.vstack([Xt, Xt])[keep], y[keep], sample_weight=w[keep])
            models[f] = model
        if not models:
            return
        pair = np.array([n not in ONE_SIDED for n in self.names] * 2)
        self.coef = dict(zip([*self.names, *(f"up:{n}" for n in self.names)],
                             np.mean([m.coef_[0] for m in models.values()], axis=0).round(3).tolist()))
        for c in range(len(self.X)):
            model = models.get(int(self.fold[c]) if self.n_folds > 1 else 0)
            if model is None:
                continue
            out = []
            for d in range(2):
                F = self.X[c][d]
                flat = F.reshape(-1, F.shape[-1]).astype(float)
                Z = (np.hstack([flat, flat * d]) - mu) / sd
                if self.pair_only:  # the pair terms' share of the log-odds, the one-sided ones at their mean
                    out.append((Z[:, pair] @ model.coef_[0][pair]).reshape(F.shape[:2]))
                    continue
                p = np.clip(model.predict_proba(Z)[:, 1], 1e-3, 1 - 1e-3) if len(Z) else np.zeros(0)
                out.append((np.log(p) - np.log(self.base)).reshape(F.shape[:2]))
            self.scores[c] = (out[0], out[1])
        self.fitted = True
