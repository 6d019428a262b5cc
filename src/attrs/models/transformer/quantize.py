"""Dynamic int8 quantisation of the network's linear layers for CPU prediction (`quantize: true`).

Weights of every `nn.Linear` (encoder and heads) are stored as int8 and activations quantised on
the fly (`torch.ao.quantization.quantize_dynamic`); embeddings and LayerNorms stay float. torch
marks this API as moving to torchao; its deprecation notices are silenced here because they are
about torch's roadmap, not about anything a psyattrs user can change. The accuracy cost is
measured by `benchmarks/transformer_benchmark.py`.
"""

from __future__ import annotations

import copy
import warnings


def quantize_dynamic(network):
    """An int8-quantised copy of `network` (the original stays float)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(network).cpu().eval(), {torch.nn.Linear},
                                                      dtype=torch.qint8)
