"""features stage: `text` (normalisation, tokenisers, `TextFeaturizer`) and `context` (the dialogue
context window of every sentence). Training and prediction both build their inputs here."""
