"""Weighted GRPO loss, advantages and weights against NumPy float64 references."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rcca_jax.rl import AGGREGATORS, group_advantages, kl_penalty, policy_loss, token_weights


def np_loss(logp, old, adv, w, mask, eps_low, eps_high, agg):
    ratio = np.exp(logp - old)
    wa = w * adv[:, None]
    obj = np.minimum(ratio * wa, np.clip(ratio, 1 - eps_low, 1 + eps_high) * wa)
    m = mask.astype(np.float64)
    if agg == "token-mean":
        return -(obj * m).sum() / m.sum()
    if agg == "seq-mean-token-mean":
        rows = [(obj[i] * m[i]).sum() / m[i].sum() for i in range(len(m)) if m[i].sum() > 0]
        return -np.mean(rows)
    return -np.mean((obj * m).sum(-1) / obj.shape[1])


def batch(seed, spread=0.5, b=6, t=9):
    rs = np.random.RandomState(seed)
    old = rs.uniform(-3, -0.1, (b, t))
    logp = old + rs.normal(0, spread, (b, t))
    adv = rs.normal(0, 1, b)
    adv[0], adv[1] = abs(adv[0]) + 0.1, -abs(adv[1]) - 0.1  # both signs present
    w = rs.uniform(0.5, 4.0, (b, t))
    mask = rs.uniform(size=(b, t)) > 0.3
    mask[2] = False  # a row with nothing to count
    return logp, old, adv, w, mask


@pytest.mark.parametrize("agg", sorted(AGGREGATORS))
@pytest.mark.parametrize("spread", [0.01, 0.8], ids=["clip-inactive", "clip-active"])
def test_loss_matches_numpy(agg, spread):
    logp, old, adv, w, mask = batch(0, spread)
    want = np_loss(logp, old, adv, w, mask, 0.2, 0.28, agg)
    got, metrics = policy_loss(*(jnp.asarray(a, jnp.float32) for a in (logp, old, adv, w)), jnp.asarray(mask),
                               eps_low=0.2, eps_high=0.28, agg=agg)
    np.testing.assert_allclose(float(got), want, rtol=1e-6, atol=1e-7)
    ratio = np.exp(logp - old)
    active = ((ratio > 1.2) & (adv[:, None] > 0)) | ((ratio < 0.8) & (adv[:, None] < 0))
    assert (float(metrics["clip/high_frac"]) + float(metrics["clip/low_frac"]) > 0) == bool((active & mask).any())


def test_unit_weights_give_plain_grpo():
    logp, old, adv, _, mask = batch(1)
    ones = np.ones_like(logp)
    got, _ = policy_loss(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), jnp.asarray(ones), jnp.asarray(mask))
    ratio = np.exp(logp - old)
    obj = np.minimum(ratio * adv[:, None], np.clip(ratio, 0.8, 1.2) * adv[:, None])
    rows = [(obj[i] * mask[i]).sum() / mask[i].sum() for i in range(len(mask)) if mask[i].any()]
    np.testing.assert_allclose(float(got), -np.mean(rows), rtol=1e-6)


def test_scaling_one_weight_scales_exactly_that_tokens_gradient():
    logp, old, adv, w, mask = batch(2, spread=0.01)
    mask[:] = True

    def grad(w_):
        return np.asarray(jax.grad(lambda lp: policy_loss(lp, jnp.asarray(old), jnp.asarray(adv),
                                                          jnp.asarray(w_), jnp.asarray(mask))[0])(
            jnp.asarray(logp)))

    g0 = grad(w)
    w2 = w.copy()
    w2[3, 4] *= 2.5
    g1 = grad(w2)
    np.testing.assert_allclose(g1[3, 4], 2.5 * g0[3, 4], rtol=1e-5)
    other = np.ones_like(mask)
    other[3, 4] = False
    np.testing.assert_array_equal(g1[other], g0[other])
    assert abs(g0[3, 4]) > 0


def test_group_advantages_reference_and_degenerate_groups():
    rewards = np.array([1.0, 0.2, 0.5, 0.1,   0.4, 0.4, 0.4, 0.4,   0.9, 0.0, 0.3, 0.7])
    valid = np.array([1, 1, 1, 1,   1, 1, 1, 1,   1, 0, 1, 1], bool)
    got = np.asarray(group_advantages(jnp.asarray(rewards), jnp.asarray(valid), 4))
    g = rewards[:4]
    np.testing.assert_allclose(got[:4], (g - g.mean()) / (g.std(ddof=1) + 1e-6), rtol=1e-5)
    assert np.all(got[4:8] == 0.0)  # no contrast: exactly zero
    g3 = rewards[[8, 10, 11]]
    np.testing.assert_allclose(got[[8, 10, 11]], (g3 - g3.mean()) / (g3.std(ddof=1) + 1e-6), rtol=1e-5)
    assert got[9] == 0.0  # an error row: excluded and zero


def test_zero_variance_groups_and_error_rows_give_zero_gradient():
    logp, old, _, w, mask = batch(3, b=8)
    rewards = jnp.asarray([0.5, 0.5, 0.5, 0.5, 1.0, 0.2, 0.3, 0.0])
    valid = jnp.asarray([True] * 5 + [False] + [True] * 2)
    adv = group_advantages(rewards, valid, 4)
    m = jnp.asarray(mask) & valid[:, None]
    g = np.asarray(jax.grad(lambda lp: policy_loss(lp, jnp.asarray(old), adv, jnp.asarray(w), m)[0])(
        jnp.asarray(logp)))
    assert np.all(g[:4] == 0.0) and np.all(g[5] == 0.0)
    assert np.abs(g[4]).sum() > 0


def test_token_weights_follow_the_sign_of_the_advantage():
    rs = np.random.RandomState(4)
    base = rs.uniform(1, 4, (5, 7)).astype(np.float32)
    diag = rs.uniform(size=(5, 7)) > 0.5
    adv = np.array([-1.0, 0.0, 2.0, -0.1, 0.3])
    got = np.asarray(token_weights(jnp.asarray(base), jnp.asarray(diag), jnp.asarray(adv)))
    for b in range(5):  # the method's rule, row by row: A < 0 the base weights, else 1 / c = 1.2
        want = base[b] if adv[b] < 0 else np.where(diag[b], 1.0, 1.2)
        np.testing.assert_array_equal(got[b], want.astype(np.float32))
    custom = token_weights(jnp.asarray(base), jnp.asarray(diag), jnp.asarray(adv), positive_other=2.0,
                           positive_diagnosed=0.5)
    assert set(np.unique(np.asarray(custom)[adv >= 0])) == {0.5, 2.0}


def test_dual_clip_bounds_negative_terms():
    logp = jnp.asarray([[3.0]])
    old = jnp.asarray([[0.0]])
    loss, _ = policy_loss(logp, old, jnp.asarray([-1.0]), jnp.ones((1, 1)), jnp.ones((1, 1)), dual_clip=3.0)
    assert float(loss) == pytest.approx(3.0)
    loss_plain, _ = policy_loss(logp, old, jnp.asarray([-1.0]), jnp.ones((1, 1)), jnp.ones((1, 1)))
    assert float(loss_plain) == pytest.approx(float(np.exp(3.0)), rel=1e-6)


def test_kl_estimators():
    lp = jnp.log(jnp.asarray([[0.5, 0.2]]))
    ref = jnp.log(jnp.asarray([[0.25, 0.2]]))
    m = jnp.ones((1, 2))
    k1 = float(kl_penalty(lp, ref, m, "k1"))
    k3 = float(kl_penalty(lp, ref, m, "k3"))
    assert k1 == pytest.approx(np.log(2) / 2, rel=1e-6)
    assert k3 == pytest.approx((0.5 - 1 - np.log(0.5)) / 2, rel=1e-6)
    with pytest.raises(ValueError, match="k2"):
        kl_penalty(lp, ref, m, "k2")


def test_row_mean_weights_keep_each_responses_total_and_ratios():
    from rcca_jax.rl.loss import WEIGHT_NORMS

    _, _, adv, w, mask = batch(3)
    m = mask.astype(np.float64)
    got = np.asarray(WEIGHT_NORMS["row_mean"](jnp.asarray(w, jnp.float32), jnp.asarray(m, jnp.float32)))
    for i in range(len(w)):
        if not mask[i].any():
            continue
        sel = mask[i]
        np.testing.assert_allclose(got[i][sel].mean(), 1.0, rtol=1e-6)  # mean 1 over counted tokens
        np.testing.assert_allclose(got[i][sel] / got[i][sel][0], w[i][sel] / w[i][sel][0], rtol=1e-6)
    # On policy (ratio 1) the per-response objective equals GRPO's A_i: the group's weighted
    # advantages sum to zero again, unlike the weights as given.
    logp = np.full_like(w, -1.0)
    normed, _ = policy_loss(jnp.asarray(logp), jnp.asarray(logp), jnp.asarray(adv), jnp.asarray(got),
                            jnp.asarray(mask))
    flat, _ = policy_loss(jnp.asarray(logp), jnp.asarray(logp), jnp.asarray(adv),
                          jnp.ones_like(jnp.asarray(logp)), jnp.asarray(mask))
    raw, _ = policy_loss(jnp.asarray(logp), jnp.asarray(logp), jnp.asarray(adv), jnp.asarray(w),
                         jnp.asarray(mask))
    np.testing.assert_allclose(float(normed), float(flat), rtol=1e-5)
    assert abs(float(raw) - float(flat)) > 1e-3
    w32 = jnp.asarray(w, jnp.float32)
    np.testing.assert_array_equal(np.asarray(WEIGHT_NORMS["none"](w32, jnp.asarray(m))), np.asarray(w32))
