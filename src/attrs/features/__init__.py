"""features stage: `tokenizers` (normalisation, the word tokenisers), `text` (the TF-IDF
`TextFeaturizer`) and `context` (the dialogue context window of every sentence). Training and prediction both build their inputs here."""
