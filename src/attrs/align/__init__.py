"""align stage: reconstructs the sentence order of the OPELA public release (`reconstruct`:
`align_public`, `aligned_corpus`, the writers; `dp`: the exact dynamic programme over merges;
`scoring`: the label classifier and the priors; `rounds`: conversations, candidate units and
re-estimation; `output`: the tables; `eval`: naive readings and scoring against a known truth).
It trains and loads models, so it sits above models/."""

from psyattrs.align.reconstruct import (
    ALIGN_COLUMNS,
    COUNTED,
    NOT_COUNTED,
    REPORT_COLUMNS,
    AlignResult,
    AlignSettings,
    align_public,
    aligned_corpus,
    cache_folder,
    output_columns,
    write_aligned,
    write_report,
)

__all__ = [
    "ALIGN_COLUMNS", "COUNTED", "NOT_COUNTED", "REPORT_COLUMNS", "AlignResult", "AlignSettings",
    "align_public", "aligned_corpus", "cache_folder", "output_columns", "write_aligned", "write_report",
]  # fmt: skip
