"""Settings that shrink the transformer for tests (2 cores): the model's own settings (`TINY`,
for `build_model`) and the same as config overrides (`SHRINK`, for `load_config`)."""

TINY = dict(hidden_size=32, layers=1, attention_heads=2, intermediate_size=64, vocab_size=300, max_length=48,
            epochs=1, batch_size=32, learning_rate=2e-3, log_every=1)
SHRINK = ["data.synthetic.dialogues=6", "data.synthetic.rare_boost=5", "model.params.epochs=1",
          "model.params.hidden_size=32", "model.params.layers=1", "model.params.intermediate_size=64",
          "model.params.vocab_size=300", "model.params.max_length=48"]
