"""align stage: reconstructs the sentence order of the OPELA public release. It trains and loads
models, so it sits above models/.

- `reconstruct`: `align_public` (the rounds, described in its docstring), `aligned_corpus` (the
  cached alignment training reads), the writers; start reading here.
- `settings`: `AlignSettings`.
- `conversations`: the release's conversations, their pause treatments and candidate units.
- `classifier`: log P(labels | unit) from a sentence classifier.
- `priors`: the label-free parts of the score (line continuation, run ends, speaker changes).
- `coherence`: what the two lines at a speaker change say together; `sentvec`: the USE sentence
  vectors of its optional cosine feature, cached per corpus.
- `rounds`: `Aligner`: lattices, the DP, re-estimation between rounds.
- `lattice` and `dp`: the exact dynamic programme over merges (its input and output; the passes).
- `output`: the utterance table and the report; `eval`: naive readings, scoring against a truth.
- `gold`: hand-made reading orders; `show`: one aligned conversation laid out for a reader.
- `summary`: `AlignSummary`: what a reconstruction knows, and when not to trust it.
"""

from psyattrs.align.reconstruct import (
    ALIGN_COLUMNS,
    COUNTED,
    NOT_COUNTED,
    REPORT_COLUMNS,
    AlignResult,
    AlignSettings,
    align_public,
    aligned_corpus,
    aligned_corpus_summary,
    cache_folder,
    output_columns,
    write_aligned,
    write_report,
)
from psyattrs.align.summary import AlignSummary, summarize_alignment

__all__ = [
    "ALIGN_COLUMNS", "COUNTED", "NOT_COUNTED", "REPORT_COLUMNS", "AlignResult", "AlignSettings",
    "align_public", "aligned_corpus", "aligned_corpus_summary", "AlignSummary", "summarize_alignment", "cache_folder", "output_columns", "write_aligned", "write_report",
]  # fmt: skip
