"""Host-side batch assembly for SFT and RL."""

from __future__ import annotations

import numpy as np
import pytest

from rcca_jax.train import batches


def test_sft_batch_masks_response_tokens_only():
    b = batches.sft_batch([[5, 6], [7]], [[8, 9, 1], [3, 1]], seq_len=6, pad_id=0)
    np.testing.assert_array_equal(b["tokens"], [[5, 6, 8, 9, 1, 0], [7, 3, 1, 0, 0, 0]])
    np.testing.assert_array_equal(b["loss_mask"], [[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0]])


def test_sft_batch_names_the_row_that_does_not_fit():
    with pytest.raises(ValueError, match="row 1"):
        batches.sft_batch([[1], [1, 2, 3]], [[1], [4, 5, 6]], seq_len=5, pad_id=0)


def test_rl_batch_aligns_logprobs_weights_and_masks_invalid_rows():
    prompts = [[5, 6], [5, 6], [7]]
    ids = [np.array([8, 9, 1]), np.array([4, 1]), np.array([3])]
    logp = [np.array([-0.1, -0.2, -0.3]), np.array([-1.0, -2.0]), np.array([-0.5])]
    w = [np.array([3.0, 1.5, 1.0]), np.array([1.5, 1.0]), np.array([2.0])]
    d = [np.array([True, True, False]), np.array([True, False]), np.array([True])]
    b = batches.rl_batch(prompts, ids, logp, np.array([1.0, -1.0, 0.5]), np.array([True, True, False]),
                         (w, d), seq_len=6, pad_id=0)
    np.testing.assert_allclose(b["old_logp"][0], [0, 0, -0.1, -0.2, -0.3, 0])
    np.testing.assert_allclose(b["weights_base"][1], [1, 1, 1.5, 1.0, 1, 1])
    np.testing.assert_array_equal(b["diagnosed"][1], [0, 0, 1, 0, 0, 0])
    assert not b["loss_mask"][2].any()  # evaluation error: masked out
    np.testing.assert_array_equal(b["loss_mask"][0], [0, 0, 1, 1, 1, 0])
    plain = batches.rl_batch(prompts, ids, logp, np.zeros(3), np.ones(3, bool), None, 6, 0)
    assert "weights_base" not in plain and "diagnosed" not in plain


def test_pad_weights_gives_eos_weight_one():
    w, d = batches.pad_weights(np.array([3.0, 1.5], np.float32), np.array([True, False]), 3)
    np.testing.assert_array_equal(w, [3.0, 1.5, 1.0])
    np.testing.assert_array_equal(d, [True, False, False])
