"""The RCCA training loop: SFT warm-up, then rollouts, evaluation, weighted GRPO."""
