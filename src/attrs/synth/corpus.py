"""The embedded default: a synthetic Korean OPELA-style corpus with known truth.

`synthesize(n)` simulates `n` conversations between eight personas (`PERSONAS`) and users
(`user0001`, ...): 15-80 turns, multi-sentence messages, pause sentences ("3시간 후"), a send time
and a turn number per sentence. Each sentence's six OPELA attributes are drawn by the simulation
(kept in `true_{head}`) and carry signal both in the wording and in the dialogue context; the
mechanism is described in `psyattrs.synth.dialogue`. Three simulated labelers with the
confusion matrices in `LABELER_CONFUSION` rate every sentence (`labeler{1,2,3}_{head}`); the final
labels (`labeler_{head}`) come from `psyattrs.labels.resolve.resolve_final_labels` with the
documented OPELA method. Conversation-level survey outcomes are generated from the attributes.

By default the final labels follow the balance of the real release (FORMATS §3: strange 0.9%
strange, uneasy 0.2% uncomfortable, engage 65%, active 34%, self 28/58/14%, empathy
41/0.2/6/43/9%); `rare_boost` multiplies the rates of the three rare events (strange = 0,
uneasy = 0, empathy = 1).

Writers: `write_annotated` (FORMATS §2) and `write_public` (FORMATS §3, with the release's quirks
and the true order returned for scoring order reconstruction).

The output depends only on the arguments: the same call writes the same bytes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from psyattrs.data.output import atomic_output
from psyattrs.labels.aggregate import METHODS
from psyattrs.labels.resolve import resolve_final_labels
from psyattrs.synth import dialogue as sim
from psyattrs.synth import lexicon as lex
from psyattrs.synth import people
from psyattrs.synth.people import PERSONAS, PersonaSpec, persona_spec
from psyattrs.synth.public import PublicTruth, write_public
from psyattrs.data.table import Corpus, final_column, labeler_column, normalize_table, true_column
from psyattrs.schema import OPELA

__all__ = [
    "LABELER_CONFUSION",
    "LABELER_PROFILES",
    "PERSONAS",
    "PersonaSpec",
    "PublicTruth",
    "SynthResult",
    "annotated_columns",
    "persona_spec",
    "synthesize",
    "write_annotated",
    "write_public",
]

HEADS: tuple[str, ...] = tuple(OPELA.head_names)
LABELER_PROFILES: dict[int, str] = {
    1: "careful: rarely wrong on any head",
    2: "lenient: gives the benefit of the doubt (misses strange and uncomfortable sentences, finds "
    "sentences engaging) and pulls the ordinal heads toward their middle classes (self 1, empathy 2-3)",
    3: "noisy: errs on every head, in every direction",
}
# LABELER_CONFUSION[k][head][t, c] = P(labeler k gives c | true class t); rows sum to 1.
# Pause rows are exempt: every labeler gives them their true (signature) values.
LABELER_CONFUSION: dict[int, dict[str, np.ndarray]] = {
    1: {
        "strange": np.array([[0.85, 0.15], [0.002, 0.998]]),
        "uneasy": np.array([[0.85, 0.15], [0.001, 0.999]]),
        "engage": np.array([[0.90, 0.10], [0.08, 0.92]]),
        "active": np.array([[0.96, 0.04], [0.05, 0.95]]),
        "self": np.array([[0.92, 0.07, 0.01], [0.05, 0.90, 0.05], [0.01, 0.09, 0.90]]),
        "empathy": np.array(
            [
                [0.93, 0.00, 0.03, 0.04, 0.00],
                [0.05, 0.80, 0.13, 0.02, 0.00],
                [0.04, 0.005, 0.855, 0.10, 0.00],
                [0.03, 0.00, 0.05, 0.88, 0.04],
                [0.00, 0.00, 0.01, 0.10, 0.89],
            ]
        ),
    },
    2: {
        "strange": np.array([[0.60, 0.40], [0.001, 0.999]]),
        "uneasy": np.array([[0.55, 0.45], [0.0005, 0.9995]]),
        "engage": np.array([[0.75, 0.25], [0.04, 0.96]]),
        "active": np.array([[0.90, 0.10], [0.08, 0.92]]),
        "self": np.array([[0.70, 0.29, 0.01], [0.03, 0.94, 0.03], [0.01, 0.34, 0.65]]),
        "empathy": np.array(
            [
                [0.80, 0.00, 0.08, 0.12, 0.00],
                [0.02, 0.50, 0.40, 0.08, 0.00],
                [0.02, 0.00, 0.62, 0.36, 0.00],
                [0.02, 0.00, 0.06, 0.90, 0.02],
                [0.00, 0.00, 0.02, 0.40, 0.58],
            ]
        ),
    },
    3: {
        "strange": np.array([[0.70, 0.30], [0.010, 0.990]]),
        "uneasy": np.array([[0.70, 0.30], [0.006, 0.994]]),
        "engage": np.array([[0.78, 0.22], [0.20, 0.80]]),
        "active": np.array([[0.82, 0.18], [0.20, 0.80]]),
        "self": np.array([[0.70, 0.20, 0.10], [0.15, 0.70, 0.15], [0.12, 0.23, 0.65]]),
        "empathy": np.array(
            [
                [0.75, 0.002, 0.08, 0.128, 0.04],
                [0.10, 0.55, 0.20, 0.10, 0.05],
                [0.12, 0.005, 0.555, 0.24, 0.08],
                [0.10, 0.002, 0.10, 0.678, 0.12],
                [0.05, 0.00, 0.07, 0.25, 0.63],
            ]
        ),
    },
}
LABELER_SUFFIX = "L1-L2-L3"
SURVEY_ITEMS: tuple[str, ...] = ("friend", "attract", "connect", "respect", "fun", "natural")
_MAX_RATE = 0.3  # no rare event may be boosted above this per-sentence probability
_START = np.datetime64("2021-12-01T00:00", "m")


@dataclass
class SynthResult:
    """A synthetic corpus.

    Attributes:
        utterances: the utterance table (`psyattrs.data.table`), chronological, with
            `labeler{1,2,3}_{head}`, `labeler_{head}` (final, resolved) and `true_{head}` for the six
            OPELA heads, plus `person_name_original` (persona full name; the user name on user rows).
        conversations: one row per `doc_id`: persona (short name), persona_name_original,
            user_name (`user0001`), user_id (20 hex digits), total_turn, total_sent (sentences,
            pauses included), total_minutes, pause_count, total_pause (hours), pause_hour (list
            string "[1, 24]"), age, gender, edu, income, open_chat_exp, then
            `{friend,attract,connect,respect,fun,natural}_{persona,user}` (1-4), blri_persona,
            blri_user (16-64), persona_summary, user_summary. `*_persona` rate the persona (the
            user's view, driven by the persona's sentences), `*_user` rate the user.
        personas: one row per persona: persona, persona_name_original, person_id, concept.
        seed, rare_boost, method: the arguments that made it.
    """

    utterances: pd.DataFrame
    conversations: pd.DataFrame
    personas: pd.DataFrame
    seed: int
    rare_boost: float
    method: str

    def to_corpus(self) -> Corpus:
        """The corpus as a reader of the annotated format would return it."""
        return Corpus(
            utterances=self.utterances,
            format="annotated",
            conversations=self.conversations,
            n_read=len(self.utterances),
            record_kind="sentence",
        )


def synthesize(
    n_dialogues: int,
    *,
    seed: int = 0,
    rare_boost: float = 1.0,
    min_turns: int = 15,
    max_turns: int = 80,
    method: str = "opela",
    release_shape: bool = False,
) -> SynthResult:
    """Simulates a corpus of `n_dialogues` conversations.

    Args:
        n_dialogues: number of conversations (>= 1).
        seed: non-negative integer; the same arguments give the same corpus.
        rare_boost: multiplies the rates of the rare events (strange = 0, uneasy = 0, empathy = 1);
            1.0 follows the real release. Must be > 0 and keep each rate at most 0.3.
        min_turns, max_turns: bounds of the number of turns (default 15-80; the number is drawn
            log-normally around 30).
        method: the resolution method for the final labels (see `psyattrs.labels.aggregate`).
        release_shape: shape the conversations as the real release's (every conversation read by
            hand, `../shared/data/opela_gold_order`): the user opens and the persona closes, so
            that there are exactly 2 x `total_turn` speaker runs; a pause closes a persona run and
            the user's next message follows it; a question is answered (97%, else 88%) and a
            reply more often picks up the partner's thing (shared words). For the public-format
            corpora order reconstruction is measured on (`write_public`); False keeps the
            original simulation (30% of conversations opened by the persona, pauses before
            persona messages).

    Returns:
        SynthResult with the utterance and conversation tables.

    Raises:
        ValueError: an argument outside its allowed range (named with the range).
    """
    _check_args(n_dialogues, seed, rare_boost, min_turns, max_turns)

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; allowed: {list(METHODS)}")
    base = sim.BASE_RATES
    rates = sim.Rates(base.strange * rare_boost, base.uneasy * rare_boost, base.failure * rare_boost)
    if not isinstance(release_shape, (bool, np.bool_)):
        raise ValueError(f"release_shape must be true or false, got {release_shape!r}")
    cols, docs = _simulate(n_dialogues, seed, rates, min_turns, max_turns, bool(release_shape))
    table = _utterance_table(cols, docs)
    labelers = _simulate_labelers(table, np.random.default_rng([seed, 7]))
    table = resolve_final_labels(pd.concat([table, labelers], axis=1), OPELA, method=method, seed=seed)
    order = [c for c in table.columns if not c.startswith("true_")] + [true_column(h) for h in HEADS]
    table = normalize_table(table[order])
    conversations = _conversations(table, docs, np.random.default_rng([seed, 11]))
    personas = pd.DataFrame(
        {
            "persona": [p.name for p in PERSONAS],
            "persona_name_original": [p.name_original for p in PERSONAS],
            "person_id": [p.person_id for p in PERSONAS],
            "concept": [p.concept for p in PERSONAS],
        }
    )
    return SynthResult(table, conversations, personas, seed, float(rare_boost), method)


def _simulate(
    n_dialogues: int, seed: int, rates: sim.Rates, min_turns: int, max_turns: int, release_shape: bool = False
) -> tuple[list[list], list[dict]]:
    """Runs the dialogues: (one list per record field over all sentences, one dict per dialogue).

    Dialogue i has its own random stream, seeded by (seed, i). A user talks with a persona at most
    once, which keeps doc_id (persona_user_turns_sentences) unique.
    """
    n_users = max(1, math.ceil(0.7 * n_dialogues))
    users: dict[int, people.UserSpec] = {}
    pairs: set[tuple[str, int]] = set()
    cols: list[list] = [[] for _ in range(sim.ACT)]
    docs: list[dict] = []
    for i in range(n_dialogues):
        rng = random.Random(f"dialogue-{seed}-{i}")
        persona = people.pick_persona(rng)
        u, tries = rng.randrange(n_users), 0
        while (persona.name, u) in pairs:
            u, tries = (u + 1) % n_users, tries + 1
            if tries >= n_users:
                u, n_users = n_users, n_users + 1
        pairs.add((persona.name, u))
        if u not in users:
            users[u] = people.make_user(seed, u)
        n_turns = sim.draw_turns(rng, min_turns, max_turns)
        writer = sim.DialogueWriter(rng, persona, users[u], rates, release_shape)
        rows, hours = writer.write(n_turns, sim.draw_pause_count(rng))
        for c, values in zip(cols, zip(*rows)):
            c.extend(values)
        docs.append(
            {
                "persona": persona,
                "user": users[u],
                "n_turns": n_turns,
                "n_sent": len(rows),
                "hours": hours,
                "start": rng.randrange(80) * 1440 + rng.randrange(8 * 60, 23 * 60),
                "minutes": rows[-1][sim.MINUTE],
                "summaries": (_summary(rng, writer, sim.PERSONA_SPEAKER), _summary(rng, writer, sim.USER_SPEAKER)),
            }
        )
    return cols, docs


def _check_args(n_dialogues: int, seed: int, rare_boost: float, min_turns: int, max_turns: int) -> None:
    if isinstance(n_dialogues, bool) or not isinstance(n_dialogues, (int, np.integer)) or n_dialogues < 1:
        raise ValueError(f"n_dialogues must be an integer >= 1, got {n_dialogues!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    base = sim.BASE_RATES
    max_boost = _MAX_RATE / max(base.strange, base.uneasy, base.failure)
    if isinstance(rare_boost, bool) or not isinstance(rare_boost, (int, float)) or not 0 < rare_boost <= max_boost:
        raise ValueError(f"rare_boost must be in (0, {max_boost:.1f}], got {rare_boost!r}")
    ints = (int, np.integer)
    if not (isinstance(min_turns, ints) and isinstance(max_turns, ints) and 1 <= min_turns <= max_turns):
        raise ValueError(f"turn bounds must be integers with 1 <= min_turns <= max_turns, got {min_turns!r}, {max_turns!r}")


def _summary(rng: random.Random, writer: sim.DialogueWriter, who: int) -> str:
    """A hashtag summary of what one side talked about, spaced as inconsistently as the release."""
    things = list(dict.fromkeys(writer.things_used[who]))
    topics = [lex.TOPICS[t].label for t in sorted(writer.topics_used[who])]
    style = rng.random()
    if style < 0.45 or not things:
        tags = topics or ["일상 이야기"]
    else:
        tags = rng.sample(things, min(len(things), 2 + int(rng.random() * 4)))
    if style < 0.6:
        return " ".join("#" + t for t in tags)
    if style < 0.75:
        return "#".join([""] + tags)
    if style < 0.85:
        return "/".join(t.replace(" 이야기", "얘기") for t in tags)
    return " ".join(("# " if rng.random() < 0.3 else "#") + t for t in tags)


def _utterance_table(cols: list[list], docs: list[dict]) -> pd.DataFrame:
    n_sent = np.array([d["n_sent"] for d in docs], dtype=np.int64)
    doc_index = np.repeat(np.arange(len(docs)), n_sent)
    doc_ids = np.array(
        [f"{d['persona'].name}_{d['user'].name}_{d['n_turns']}_{d['n_sent']}_{LABELER_SUFFIX}" for d in docs],
        dtype=object,
    )
    starts = np.concatenate([[0], np.cumsum(n_sent)[:-1]])
    position = np.arange(len(doc_index)) - starts[doc_index]
    speaker = np.array(cols[sim.SPEAKER], dtype=np.int8)
    is_user = speaker == sim.USER_SPEAKER

    def by_speaker(persona_values: list[str], user_values: list[str]) -> np.ndarray:
        return np.where(is_user, np.array(user_values, dtype=object)[doc_index], np.array(persona_values, dtype=object)[doc_index])

    persona_names = [d["persona"].name for d in docs]
    user_names = [d["user"].name for d in docs]
    minutes = np.array([d["start"] for d in docs], dtype=np.int64)[doc_index] + np.array(cols[sim.MINUTE], dtype=np.int64)
    times = np.datetime_as_string(_START + minutes.astype("timedelta64[m]"), unit="m")
    doc_col = doc_ids[doc_index]
    data = {
        "doc_id": doc_col,
        "sent_id": [f"{d}_{p + 1}" for d, p in zip(doc_col, position.tolist())],
        "position": position,
        "person_type": np.where(is_user, "user", "persona"),
        "person_name": by_speaker(persona_names, user_names),
        "person_id": by_speaker([d["persona"].person_id for d in docs], [d["user"].user_id for d in docs]),
        "persona": np.array(persona_names, dtype=object)[doc_index],
        "turn": np.array(cols[sim.TURN], dtype=np.int64),
        "time": np.char.replace(times, "T", " "),
        "is_pause": np.array(cols[sim.IS_PAUSE], dtype=bool),
        "text": cols[sim.TEXT],
        "person_name_original": by_speaker([d["persona"].name_original for d in docs], user_names),
    }
    for head, c in zip(HEADS, (sim.STRANGE, sim.UNEASY, sim.ENGAGE, sim.ACTIVE, sim.SELF, sim.EMPATHY)):
        data[true_column(head)] = np.array(cols[c], dtype=np.int64)
    table = pd.DataFrame(data)
    for col in ("doc_id", "sent_id", "person_type", "person_name", "person_id", "persona", "time", "text", "person_name_original"):
        table[col] = table[col].astype(str)
    return table


def _simulate_labelers(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Draws `labeler{k}_{head}` for k = 1..3 from `LABELER_CONFUSION`; pause rows get the truth."""
    pause = table["is_pause"].to_numpy()
    out = {}
    for k in sorted(LABELER_CONFUSION):
        for head in HEADS:
            truth = table[true_column(head)].to_numpy()
            cum = np.cumsum(LABELER_CONFUSION[k][head], axis=1)[:, :-1]
            u = rng.random(len(truth))
            given = (u[:, None] >= cum[truth]).sum(axis=1)
            given[pause] = truth[pause]
            out[labeler_column(k, head)] = pd.array(given, dtype="Int64")
    return pd.DataFrame(out, index=table.index)


def _conversations(table: pd.DataFrame, docs: list[dict], rng: np.random.Generator) -> pd.DataFrame:
    n = len(docs)
    doc_index = np.repeat(np.arange(n), [d["n_sent"] for d in docs])
    content = ~table["is_pause"].to_numpy()
    side = (table["person_type"].to_numpy() == "user").astype(np.int64)
    group = doc_index * 2 + side

    def rate(values: np.ndarray) -> np.ndarray:
        num = np.bincount(group, weights=values * content, minlength=2 * n)
        den = np.bincount(group, weights=content.astype(float), minlength=2 * n)
        return (num / np.maximum(den, 1)).reshape(n, 2)

    truth = {h: table[true_column(h)].to_numpy() for h in HEADS}
    emp = rate((truth["empathy"] >= 3).astype(float))
    eng = rate(truth["engage"].astype(float))
    act = rate(truth["active"].astype(float))
    bad = (truth["strange"] == 0) | (truth["uneasy"] == 0) | (truth["empathy"] == 1)
    bad_n = np.bincount(group, weights=bad * content, minlength=2 * n).reshape(n, 2)
    users = [d["user"] for d in docs]
    age = np.array([u.age for u in users])
    open_chat = np.array([u.open_chat_exp for u in users])
    rater = np.stack([np.array([u.leniency for u in users]), rng.normal(0.0, 0.3, n)], axis=1)
    # how well each side came across: more empathy, engagement and activity, fewer strange,
    # uncomfortable or dismissive sentences -> higher; plus the rater's leniency and noise
    quality = (
        7.0 * (emp - 0.5) + 6.0 * (eng - 0.65) + 3.0 * (act - 0.33) - 0.35 * bad_n + rater
        + (0.12 * (open_chat == 1) - 0.006 * (age - 33))[:, None]
        + rng.normal(0.0, 0.25, (n, 2))
    )
    out: dict[str, object] = {
        "doc_id": table["doc_id"].to_numpy()[np.concatenate([[0], np.cumsum([d["n_sent"] for d in docs])[:-1]])],
        "persona": [d["persona"].name for d in docs],
        "persona_name_original": [d["persona"].name_original for d in docs],
        "user_name": [u.name for u in users],
        "user_id": [u.user_id for u in users],
        "total_turn": [d["n_turns"] for d in docs],
        "total_sent": [d["n_sent"] for d in docs],
        "total_minutes": [d["minutes"] for d in docs],
        "pause_count": [len(d["hours"]) for d in docs],
        "total_pause": [sum(d["hours"]) for d in docs],
        "pause_hour": ["[" + ", ".join(map(str, d["hours"])) + "]" for d in docs],
        "age": age,
        "gender": [u.gender for u in users],
        "edu": [u.edu for u in users],
        "income": [u.income for u in users],
        "open_chat_exp": open_chat,
    }
    cuts = np.array([-2.05, -1.47, 0.12])
    for item in SURVEY_ITEMS:
        for j, who in enumerate(("persona", "user")):
            latent = quality[:, j] + rng.normal(0.0, 0.35, n)
            out[f"{item}_{who}"] = 1 + (latent[:, None] > cuts).sum(axis=1)
    for j, who in enumerate(("persona", "user")):
        out[f"blri_{who}"] = np.clip(np.round(53 + 6 * quality[:, j] + rng.normal(0.0, 3.0, n)), 16, 64).astype(np.int64)
    out["persona_summary"] = [d["summaries"][0] for d in docs]
    out["user_summary"] = [d["summaries"][1] for d in docs]
    frame = pd.DataFrame(out)
    for col in frame.columns:
        if frame[col].dtype.kind in "iu":
            frame[col] = frame[col].astype("int64")
    return frame


# --------------------------------------------------------------------------------------------
# The annotated format (FORMATS §2)
# --------------------------------------------------------------------------------------------


def annotated_columns(n_labelers: int = 3, *, with_truth: bool = True) -> list[str]:
    """Column names of the annotated CSV in the order FORMATS §2 lists them (then `true_*`)."""
    cols = ["doc_id", "sent_id", "person_type", "person_name", "person_name_original", "turn_notation", "time", "is_pause", "text"]
    cols += [labeler_column(k, h) for k in range(1, n_labelers + 1) for h in HEADS]
    cols += ["person_id"] + [final_column(h) for h in HEADS]
    if with_truth:
        cols += [true_column(h) for h in HEADS]
    return cols


def write_annotated(df: pd.DataFrame, path: "str | Path") -> Path:
    """Writes an utterance table as an OPELA annotated CSV (FORMATS §2), UTF-8, integers as integers.

    Columns, in order: doc_id, sent_id, person_type, person_name, person_name_original,
    turn_notation (from `turn`), time, is_pause (0/1), text, labeler{1,2,3}_{six heads}, person_id,
    labeler_{six heads}, then true_{six heads} when the table has them. `person_name_original`
    falls back to `person_name` when the table has no such column.

    Args:
        df: utterance table (e.g. `SynthResult.utterances`) with the three labelers' and the final
            columns of the OPELA heads.
        path: the CSV to write; missing parent folders are created.

    Returns:
        The path written.

    Raises:
        ValueError: a required column is missing (all missing ones are named).
    """
    with_truth = all(true_column(h) in df.columns for h in HEADS)
    wanted = annotated_columns(3, with_truth=with_truth)
    source = {"turn_notation": "turn", "person_name_original": "person_name_original"}
    if "person_name_original" not in df.columns:
        source["person_name_original"] = "person_name"
    missing = [c for c in wanted if source.get(c, c) not in df.columns]
    if missing:
        raise ValueError(f"cannot write the annotated format: missing column(s) {missing}")
    out = pd.DataFrame({c: df[source.get(c, c)] for c in wanted})
    out["is_pause"] = out["is_pause"].astype(bool).astype(np.int64)
    for c in wanted:
        if c.startswith(("labeler", "true_")) or c == "turn_notation":
            col = pd.to_numeric(out[c]).astype("Int64")
            # plain int64 writes several times faster; empty cells stay empty through Int64
            out[c] = col.to_numpy(dtype=np.int64) if not col.isna().any() else col
    path = Path(path)
    with atomic_output(path, make_parents=True) as tmp:  # complete or absent
        out.to_csv(tmp, index=False, encoding="utf-8", lineterminator="\n")
    return path
