"""Localization: diagnostics -> spans of the response -> per-token loss weights.

Modules (imported one by one, so that a trainer needing only ``weights`` does not load
tree-sitter):

- ``graph``: ``build_graph`` builds the code graph of a single-file app (records in ``model``).
- ``tokens``: character ranges of the sampled tokens and ``span_mask``.
- ``weights``: ``WeightConfig`` and ``base_weights`` (the advantage-sign rule is the trainer's).
"""
