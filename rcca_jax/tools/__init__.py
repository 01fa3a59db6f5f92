"""Command-line tools of rcca_jax."""
