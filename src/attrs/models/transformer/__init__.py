"""The multi-head transformer (kind `transformer`): encoder + heads (`network`), input building
(`inputs`), tokenizer training (`tokenizer`), backbones (`backbone`), loss (`loss`), training loop
and checkpoints (`training`), the `MultiHeadModel` (`model`). torch and transformers are imported
only when a transformer is built, fitted or loaded."""
