"""Tables out of the aligner's readings: the utterance table and the per-conversation report."""

from __future__ import annotations

import numpy as np
import pandas as pd

from psyattrs.align import lattice
from psyattrs.align.conversations import NOT_COUNTED, Conversation
from psyattrs.align.priors import SIGNATURE
from psyattrs.align.rounds import Fit
from psyattrs.data.table import Corpus, final_column, normalize_table
from psyattrs.schema import Schema

ALIGN_COLUMNS: tuple[str, ...] = ("align_confidence", "label_position", "line_start", "line_end", "align_mode")
"""Columns the aligner adds to the utterance table (see `psyattrs.align.AlignResult`)."""
REPORT_COLUMNS: tuple[str, ...] = (
    "doc_id", "persona", "status", "reason", "mode", "loglik", "loglik_other_mode", "mode_probability",
    "n_labels", "persona_lines", "user_lines", "merged_lines", "multi_line_units", "pauses_on_labels",
    "pauses_unlabelled", "pauses_without_line", "blank_lines_skipped", "pause_on_signature",
    "speaker_runs", "total_turn", "mean_confidence", "min_confidence", "rounds_stop", "frozen_round",
)  # fmt: skip
"""The per-conversation report: `mode` the pause treatment; `loglik` its log-likelihood of the
labels and `loglik_other_mode` the other's (NaN when there is one treatment only);
`mode_probability` the posterior of the chosen treatment; `merged_lines` the lines that joined an
earlier line of their message; `multi_line_units` labels spanning more than one line;
`pauses_on_labels` blank lines holding a label; `pauses_unlabelled` pauses left out of the labels;
`pauses_without_line` labelled pauses with no blank line; `blank_lines_skipped` blank lines that
are not sentences (user, or persona beyond the pauses); `pause_on_signature` labelled pauses whose
labels carry the pause signature; `speaker_runs` persona/user runs; `status` `aligned` or `set
aside` with `reason`; `rounds_stop` how the conversation's rounds stopped (`settled`: its units
unchanged in `freeze_after` consecutive rounds; `flipping`: at most `freeze_tol` of its labels
changed unit in each of them; `cycle`: back to an earlier round's units; `open`:
still changing when the rounds stopped) and `frozen_round` the round it froze at."""



def unfit_reason(c: Conversation) -> str:
    lines = int((~c.p_blank).sum() + (~c.u_blank).sum())
    return (
        f"{lines} non-blank lines, {int(c.p_blank.sum())} blank persona lines and pause_count {c.pause_count} "
        f"cannot hold {c.T} labels: too few lines for any reading"
    )


# ----------------------------------------------------------------------------------------------
# output


def utterance_table(convs: list[Conversation], fits: list[Fit | None], schema: Schema) -> pd.DataFrame:
    heads = [final_column(h) for h in schema.head_names]
    cols: dict[str, list] = {k: [] for k in ("doc_id", "person_type", "person_name", "person_id", "persona",
                                             "person_name_original", "is_pause", "text", "align_confidence",
                                             "label_position", "line_start", "line_end", "align_mode")}
    label_rows: list[np.ndarray | None] = []
    na_labels = None
    for c, f in zip(convs, fits):
        if f is None:
            continue
        rows = conversation_rows(c, f)
        for r in rows:
            speaker = r["speaker"]
            cols["doc_id"].append(c.doc_id)
            cols["person_type"].append(speaker)
            cols["person_name"].append(c.meta["persona_name"] if speaker == "persona" else c.meta["user_name"])
            cols["person_id"].append("" if speaker == "persona" else c.meta["user_id"])
            cols["persona"].append(c.meta["persona"])
            cols["person_name_original"].append(c.meta["persona_name_original"] if speaker == "persona" else c.meta["user_name"])
            cols["is_pause"].append(r["is_pause"])
            cols["text"].append(r["text"])
            cols["align_confidence"].append(r["confidence"])
            cols["label_position"].append(r["t"])
            cols["line_start"].append(r["line_start"])
            cols["line_end"].append(r["line_end"])
            cols["align_mode"].append(f.mode.name)
            label_rows.append(c.labels[r["t"]] if r["t"] is not None else None)
    n = len(cols["doc_id"])
    table = pd.DataFrame({k: v for k, v in cols.items() if k not in ALIGN_COLUMNS})
    table["position"] = table.groupby("doc_id", sort=False).cumcount() if n else pd.Series(dtype="int64")
    table["sent_id"] = table["doc_id"] + "_" + (table["position"] + 1).astype(str) if n else pd.Series(dtype=str)
    for col, head in enumerate(heads):
        values = [r[col] if r is not None else pd.NA for r in label_rows]
        table[head] = pd.array(values, dtype="Int64")
    table = normalize_table(table, schema)
    table["align_confidence"] = pd.Series(cols["align_confidence"], dtype="float64")
    for name in ("label_position", "line_start", "line_end"):
        table[name] = pd.array([pd.NA if v is None else int(v) for v in cols[name]], dtype="Int64")
    table["align_mode"] = pd.Series(cols["align_mode"], dtype=str)
    del na_labels
    return table


def conversation_rows(c: Conversation, f: Fit) -> list[dict]:
    """The rows of one conversation in chronological order (unlabelled pauses inserted)."""
    rows = []
    mode = f.mode
    for st, conf in zip(f.path.steps, f.confidence):
        if st.kind == lattice.PERSONA:
            a = int(mode.p_items[st.start])
            rows.append(dict(speaker="persona", is_pause=False, text="\n".join(c.p_text[a : a + st.k]), t=st.t,
                             line_start=a, line_end=a + st.k, confidence=float(conf)))
        elif st.kind == lattice.USER:
            a = int(mode.u_items[st.start])
            rows.append(dict(speaker="user", is_pause=False, text="\n".join(c.u_text[a : a + st.k]), t=st.t,
                             line_start=a, line_end=a + st.k, confidence=float(conf)))
        elif st.kind == lattice.PAUSE:
            a = int(mode.p_items[st.start])
            rows.append(dict(speaker="persona", is_pause=True, text=c.p_text[a], t=st.t, line_start=a, line_end=a + 1,
                             confidence=float(conf)))
        else:
            rows.append(dict(speaker="persona", is_pause=True, text="", t=st.t, line_start=None, line_end=None,
                             confidence=float(conf)))
    if mode.name == NOT_COUNTED:
        # the release left these pauses out of the labels: each goes right before the persona's
        # next message (after the user's messages in between), as context without labels
        for b in np.flatnonzero(c.p_blank)[::-1]:
            at = next((k for k, r in enumerate(rows) if r["speaker"] == "persona" and r["line_start"] is not None
                       and r["line_start"] > b), len(rows))
            rows.insert(at, dict(speaker="persona", is_pause=True, text=c.p_text[b], t=None, line_start=int(b),
                                 line_end=int(b) + 1, confidence=float("nan")))
    return rows


def report_table(corpus: Corpus, convs: list[Conversation], fits: list[Fit | None], unfit: list[Conversation], schema: Schema) -> pd.DataFrame:
    sig = [(col, v) for col, h in enumerate(schema.head_names) if h in SIGNATURE for v in [SIGNATURE[h]]]
    by_doc = {}
    for c, f in zip(convs, fits):
        r = base_report(c)
        if f is None:
            r.update(status="set aside", reason="no reading of the lines scores above zero probability")
            by_doc[c.doc_id] = r
            continue
        steps = f.path.steps
        units = [st for st in steps if st.kind in (lattice.PERSONA, lattice.USER)]
        pauses = [st for st in steps if st.kind in (lattice.PAUSE, lattice.PHANTOM)]
        speakers = [st.kind for st in units]
        runs = 1 + sum(a != b for a, b in zip(speakers, speakers[1:])) if speakers else 0
        on_sig = (
            float(np.mean([all(c.labels[st.t, col] == v for col, v in sig) for st in pauses]))
            if pauses and sig else float("nan")
        )
        r.update(
            status="aligned", reason="", mode=f.mode.name, loglik=f.loglik, loglik_other_mode=f.loglik_other,
            mode_probability=f.mode_prob, merged_lines=sum(st.k - 1 for st in units),
            multi_line_units=sum(st.k > 1 for st in units),
            pauses_on_labels=sum(st.kind == lattice.PAUSE for st in steps),
            pauses_unlabelled=int(c.p_blank.sum()) if f.mode.name == NOT_COUNTED else 0,
            pauses_without_line=sum(st.kind == lattice.PHANTOM for st in steps),
            blank_lines_skipped=int(c.u_blank.sum()) + len(f.path.skipped),
            pause_on_signature=on_sig, speaker_runs=runs,
            mean_confidence=float(f.confidence.mean()) if len(f.confidence) else float("nan"),
            min_confidence=float(f.confidence.min()) if len(f.confidence) else float("nan"),
        )
        by_doc[c.doc_id] = r
    for c in unfit:
        r = base_report(c)
        r.update(status="set aside", reason=unfit_reason(c))
        by_doc[c.doc_id] = r
    for p in corpus.problems:
        if p.doc_id not in by_doc:
            by_doc[p.doc_id] = {"doc_id": p.doc_id, "status": "set aside", "reason": f"{p.field}: {p.reason}"}
    order = [str(d) for d in corpus.conversations["doc_id"]] + [p.doc_id for p in corpus.problems]
    rows = [by_doc[d] for d in dict.fromkeys(order) if d in by_doc]
    return pd.DataFrame(rows, columns=list(REPORT_COLUMNS))


def base_report(c: Conversation) -> dict:
    return {
        "doc_id": c.doc_id, "persona": c.meta["persona"], "n_labels": c.T, "persona_lines": len(c.p_text),
        "user_lines": len(c.u_text), "total_turn": c.total_turn,
    }


