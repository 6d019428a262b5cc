"""synth stage: the synthetic OPELA corpus with known truth (`corpus`: `synthesize`, the writers
and the simulated labelers, start reading here; `people`: the personas and users; `dialogue`: the
conversation simulator; `lexicon`: the Korean wording; `public`: the public-release layout and its
true order). It resolves final labels with the labels stage, so it sits above data/ and labels/."""

from psyattrs.synth.corpus import (
    LABELER_CONFUSION,
    LABELER_PROFILES,
    PERSONAS,
    PersonaSpec,
    PublicTruth,
    SynthResult,
    annotated_columns,
    persona_spec,
    synthesize,
    write_annotated,
    write_public,
)

__all__ = [
    "LABELER_CONFUSION", "LABELER_PROFILES", "PERSONAS", "PersonaSpec", "PublicTruth", "SynthResult",
    "annotated_columns", "persona_spec", "synthesize", "write_annotated", "write_public",
]  # fmt: skip
