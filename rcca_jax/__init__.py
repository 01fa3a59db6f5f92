"""rcca_jax: the accelerator side of RCCA (policy, sampler, weighted-GRPO train step)."""
