"""Rubric-driven task synthesis: drafts (from a model or offline) validated by running them."""
