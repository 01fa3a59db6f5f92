"""Ling-3.0 (`bailing_hybrid`) in Flax NNX.

    from rcca_jax.models import from_pretrained
    model = from_pretrained("path/to/checkpoint", dtype=jnp.bfloat16, mesh=None)
    logits = model(tokens)  # int32 [B, T] -> float32 [B, T, V]
"""

from rcca_jax.models.checkpoint import CheckpointError, from_pretrained, save_pretrained
from rcca_jax.models.config import LingConfig, param_counts
from rcca_jax.models.model import Ling

__all__ = ["CheckpointError", "Ling", "LingConfig", "from_pretrained", "param_counts", "save_pretrained"]
