"""CPU-side evaluator of generated web apps: gates, rubric probes, diagnostics.

This package never imports JAX: it runs on CPU-only evaluator hosts.
"""
