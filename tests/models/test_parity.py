"""Parity with the transformers `bailing_hybrid` reference (CPU, float32).

Every check loads the reference's `save_pretrained` output through our
safetensors loader; nothing is copied in memory.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models import reference

torch = pytest.importorskip("torch")

from rcca_jax.models import from_pretrained  # noqa: E402
from rcca_jax.models.decode import greedy  # noqa: E402
from rcca_jax.models.kda import kda_chunked, kda_recurrent  # noqa: E402

ATOL = 1e-4


@pytest.fixture(scope="module", params=sorted(reference.CONFIGS))
def pair(request, tmp_path_factory):
    ref, path = reference.save(request.param, tmp_path_factory.mktemp("hf"))
    return request.param, ref, path


def _ref_logits(ref, toks, mask=None):
    with torch.no_grad():
        kw = {} if mask is None else {"attention_mask": torch.tensor(mask.astype(np.int64))}
        return ref(torch.tensor(toks.astype(np.int64)), **kw).logits.numpy()


@pytest.mark.parametrize("chunk", [8, pytest.param(64, marks=pytest.mark.slow)])
def test_logits_match_reference(pair, chunk):
    name, ref, path = pair
    model = from_pretrained(path, kda_chunk_size=chunk, attn_block=chunk)
    toks = reference.tokens(ref.config.vocab_size, (3, 37), seed=1)
    want = _ref_logits(ref, toks)
    got = np.asarray(model(jnp.asarray(toks)))
    assert np.abs(want).max() > 0.5, "reference logits too small for an informative check"
    np.testing.assert_allclose(got, want, atol=ATOL, rtol=0)


def test_both_moe_paths_match_reference(pair):
    _, ref, path = pair
    toks = reference.tokens(ref.config.vocab_size, (2, 19), seed=2)
    want = _ref_logits(ref, toks)
    # A capacity factor of E/k gives every expert room for every token: nothing dropped.
    cf = ref.config.num_local_experts / ref.config.num_experts_per_tok
    model = from_pretrained(path, moe_dispatch="capacity", capacity_factor=cf)
    np.testing.assert_allclose(np.asarray(model(jnp.asarray(toks))), want, atol=ATOL, rtol=0)


@pytest.mark.slow
def test_greedy_decoding_matches_generate(pair):
    _, ref, path = pair
    model = from_pretrained(path)
    prompt = reference.tokens(ref.config.vocab_size, (2, 7), seed=3)
    with torch.no_grad():
        out = ref.generate(torch.tensor(prompt.astype(np.int64)), max_new_tokens=32, do_sample=False,
                           min_new_tokens=32, eos_token_id=None, pad_token_id=0)
    want = out[:, prompt.shape[1]:].numpy()
    got = np.asarray(greedy(model, jnp.asarray(prompt), 32))
    np.testing.assert_array_equal(got, want)


def test_left_padded_batch_matches_unpadded_rows(pair):
    """Padding masks: a left-padded row gives the logits of the same row alone."""
    _, ref, path = pair
    model = from_pretrained(path)
    toks = reference.tokens(ref.config.vocab_size, (2, 12), seed=4)
    mask = np.ones_like(toks, bool)
    mask[1, :5] = False
    pos = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
    got = np.asarray(model(jnp.asarray(toks), positions=jnp.asarray(pos), mask=jnp.asarray(mask)))
    alone = np.asarray(model(jnp.asarray(toks[1:, 5:])))
    np.testing.assert_allclose(got[1, 5:], alone[0], atol=ATOL, rtol=0)
    np.testing.assert_allclose(got[0], _ref_logits(ref, toks[:1])[0], atol=ATOL, rtol=0)


def test_cached_prefill_in_pieces_equals_one_forward(pair):
    _, ref, path = pair
    model = from_pretrained(path, kda_chunk_size=4, attn_block=4)
    toks = jnp.asarray(reference.tokens(ref.config.vocab_size, (2, 23), seed=5))
    full = np.asarray(model(toks))
    cache = model.init_cache(2, 32)
    parts = []
    for a, b in ((0, 9), (9, 10), (10, 23)):
        logits, cache = model.step(toks[:, a:b], cache)
        parts.append(np.asarray(logits))
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, atol=ATOL, rtol=0)


@pytest.mark.parametrize("t,chunk", [(1, 4), (13, 4), (64, 16), (50, 64)])
def test_chunked_and_recurrent_kda_agree(t, chunk):
    b, h, k = 2, 3, 8
    keys = jax.random.split(jax.random.PRNGKey(t), 6)
    q = jax.random.normal(keys[0], (b, t, h, k))
    kk = jax.random.normal(keys[1], (b, t, h, k))
    v = jax.random.normal(keys[2], (b, t, h, k))
    g = -5.0 * jax.nn.sigmoid(jax.random.normal(keys[3], (b, t, h, k)))
    beta = jax.nn.sigmoid(jax.random.normal(keys[4], (b, t, h)))
    s0 = jax.random.normal(keys[5], (b, h, k, k))
    o1, s1 = kda_recurrent(q, kk, v, g, beta, s0)
    o2, s2 = kda_chunked(q, kk, v, g, beta, s0, chunk)
    np.testing.assert_allclose(np.asarray(o2), np.asarray(o1), atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(s2), np.asarray(s1), atol=1e-5, rtol=0)
    assert float(jnp.abs(o1).max()) > 0.1
