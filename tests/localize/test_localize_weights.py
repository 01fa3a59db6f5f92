"""Base token weights: accumulation across diagnostics, the cap (the advantage-sign rule is the
trainer's: tests/rl/test_loss.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from evaluators.localize.weights import WeightConfig, base_weights


def m(*bits):
    return np.array(bits, dtype=bool)


def test_config_defaults_and_frozen():
    cfg = WeightConfig()
    assert (cfg.direct, cfg.context, cfg.other, cfg.cap) == (3.0, 1.5, 1.0, 4.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.cap = 5.0


def test_no_diagnostics():
    w, diagnosed = base_weights(3, [])
    assert w.dtype == np.float32 and w.tolist() == [1.0, 1.0, 1.0]
    assert diagnosed.dtype == bool and diagnosed.tolist() == [False, False, False]


def test_single_diagnostic_direct_wins_over_context():
    #                 tokens: 0      1      2      3
    w, diagnosed = base_weights(4, [(m(1, 1, 0, 0), m(0, 1, 1, 0))])
    assert w.tolist() == [3.0, 3.0, 1.5, 1.0]
    assert diagnosed.tolist() == [True, True, True, False]


def test_accumulation_and_cap():
    # Token by token, w = min(4, 1 + Σ_k (w_k − 1)):
    #   0: dir, dir        -> 1 + 2 + 2     = 5    -> 4 (cap)
    #   1: dir, ctx        -> 1 + 2 + 0.5   = 3.5
    #   2: ctx, ctx        -> 1 + 0.5 + 0.5 = 2
    #   3: ctx, -          -> 1.5
    #   4: -, -            -> 1
    #   5: ctx, ctx, ctx   -> 1 + 1.5       = 2.5 (third diagnostic)
    masks = [
        (m(1, 1, 0, 0, 0, 0), m(0, 0, 1, 1, 0, 1)),
        (m(1, 0, 0, 0, 0, 0), m(0, 1, 1, 0, 0, 1)),
        (m(0, 0, 0, 0, 0, 0), m(0, 0, 0, 0, 0, 1)),
    ]
    w, diagnosed = base_weights(6, masks)
    np.testing.assert_array_equal(w, np.array([4.0, 3.5, 2.0, 1.5, 1.0, 2.5], np.float32))
    assert diagnosed.tolist() == [True, True, True, True, False, True]


def test_custom_config():
    cfg = WeightConfig(direct=2.0, context=1.25, cap=10.0)
    w, _ = base_weights(3, [(m(1, 0, 0), m(0, 1, 0))] * 3, cfg)
    assert w.tolist() == [4.0, 1.75, 1.0]


def test_mask_shape_is_checked():
    with pytest.raises(ValueError):
        base_weights(3, [(m(1, 0), m(0, 1, 0))])
