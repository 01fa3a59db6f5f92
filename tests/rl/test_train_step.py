"""The train step (sharded == unsharded, micro-batching exact, bias update) and the sampler."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rcca_jax import sharding
from rcca_jax.models import Ling, LingConfig
from rcca_jax.models.decode import greedy
from rcca_jax.models.logprobs import token_logprobs
from rcca_jax.models.stack import layer_split, layer_view
from rcca_jax.rl.sampler import SamplerConfig, left_pad, sample
from rcca_jax.rl.train_step import TrainConfig, compile_train_step, init_state
from rcca_jax.state import global_batch

# 4 MoE layers, all scanned: 2 groups of (KDA, MLA).
CFG = LingConfig(vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                 num_layers=4, num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
                 v_head_dim=16, linear_head_dim=16, num_experts=8, num_experts_per_tok=2, n_group=2,
                 topk_group=1, first_k_dense_replace=0, layer_group_size=2, kda_chunk_size=8,
                 initializer_range=0.15, eos_token_id=1, pad_token_id=0)
# SGD keeps parameter updates linear in the gradient, so equal gradients give
# equal parameters (Adam's m/sqrt(v) would amplify float noise on tiny gradients).
TRAIN = TrainConfig(optimizer="sgd", learning_rate=1e-2, max_grad_norm=1e9, logprob_chunk=8)


def make_batch(seed=0, b=8, t=12):
    rs = np.random.RandomState(seed)
    mask = np.zeros((b, t), bool)
    for i in range(b):
        mask[i, 4:4 + rs.randint(3, t - 4)] = True
    return {
        "tokens": rs.randint(2, CFG.vocab_size, (b, t)).astype(np.int32),
        "loss_mask": mask,
        "old_logp": rs.uniform(-5, -1, (b, t)).astype(np.float32),
        "advantages": rs.normal(0, 1, b).astype(np.float32),
        "weights_base": rs.uniform(1, 4, (b, t)).astype(np.float32),
        "diagnosed": rs.uniform(0, 1, (b, t)) < 0.3,
    }


def run(cfg: TrainConfig, batch, mesh=None, steps=1, model_cfg: LingConfig = CFG):
    graphdef, state = init_state(Ling(model_cfg, nnx.Rngs(0)), cfg)
    state, fn = compile_train_step(graphdef, cfg, state, batch, mesh)
    b = global_batch(batch, mesh) if mesh is not None else {k: jnp.asarray(v) for k, v in batch.items()}
    for _ in range(steps):
        state, metrics = fn(state, b)
    return state, jax.device_get(metrics)


def flat(state):
    return {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state.params)}


def by_layer(tree: nnx.State, model_cfg: LingConfig = CFG) -> dict[tuple, np.ndarray]:
    """Every variable under its unrolled path (layer order), a stacked one row by row."""
    return {p: np.asarray(v.get_value() if g is None else v.get_value()[g])
            for p, v, g in layer_view(tree, layer_split(model_cfg))}


@pytest.fixture(scope="module")
def reference_run():
    return run(TRAIN, make_batch())


def test_step_changes_params_and_reports_metrics(reference_run):
    state, metrics = reference_run
    for key in ("loss/pg", "clip/low_frac", "clip/high_frac", "ratio/mean", "policy/entropy",
                "optim/grad_norm", "moe/load_max_over_mean"):
        assert np.isfinite(metrics[key]), key
    assert metrics["moe/load"].shape == (4, CFG.num_experts)
    assert int(state.step) == 1
    _, init = init_state(Ling(CFG, nnx.Rngs(0)), TRAIN)
    assert any(np.abs(a - flat(init)[p]).max() > 0 for p, a in flat(state).items())


def test_micro_batches_sum_to_the_full_batch(reference_run):
    state, metrics = reference_run
    state4, metrics4 = run(dataclasses.replace(TRAIN, micro_batches=4), make_batch())
    assert metrics4["loss/pg"] == pytest.approx(metrics["loss/pg"], rel=1e-5)
    assert metrics4["optim/grad_norm"] == pytest.approx(metrics["optim/grad_norm"], rel=1e-4)
    for p, a in flat(state).items():
        np.testing.assert_allclose(flat(state4)[p], a, atol=2e-6, err_msg=str(p))


@pytest.mark.parametrize("layout", [pytest.param({"data": 8}, marks=pytest.mark.slow), {"fsdp": 4, "expert": 2},
                                    {"expert": 4, "tensor": 2}],
                         ids=lambda d: "-".join(f"{k}{v}" for k, v in d.items()))
def test_sharded_step_equals_unsharded(reference_run, layout):
    state, metrics = reference_run
    mesh = sharding.make_mesh(layout)
    state_s, metrics_s = run(TRAIN, make_batch(), mesh)
    assert metrics_s["loss/pg"] == pytest.approx(metrics["loss/pg"], rel=1e-5)
    for p, a in flat(state).items():
        np.testing.assert_allclose(flat(state_s)[p], a, atol=2e-6, err_msg=str(p))
    biases = [np.asarray(v.get_value()) for _, v in nnx.to_flat_state(state_s.rest)]
    want = [np.asarray(v.get_value()) for _, v in nnx.to_flat_state(state.rest)]
    for a, b in zip(biases, want):
        np.testing.assert_allclose(a, b, atol=1e-7)


def test_expert_bias_moves_against_load(reference_run):
    state, metrics = reference_run
    load = metrics["moe/load"]
    bias = list(by_layer(state.rest).values())  # layer order, as the load's rows
    assert len(bias) == len(load) == 4
    for layer_load, b in zip(load, bias):
        over, under = layer_load > layer_load.mean(), layer_load < layer_load.mean()
        assert over.any() and under.any()
        assert b[over].max() < b[under].min()
        assert abs(b.sum()) < 1e-6  # zero-mean option


def test_expert_bias_leaves_tied_experts_put():
    from rcca_jax.models.moe import update_expert_bias

    # 8 experts, 64 routed slots: experts 0-3 got 8 tokens each (the mean), 4-5 got 9, 6-7 got 7.
    counts = np.array([8, 8, 8, 8, 9, 9, 7, 7], np.float32)
    rounded = counts / 64
    rounded[:4] = np.nextafter(rounded[:4], np.float32([1, 0, 1, 0]))  # a micro-batch mean's rounding
    for load in (counts / 64, rounded):
        got = np.asarray(update_expert_bias(jnp.zeros(8), jnp.asarray(load, jnp.float32), 0.01))
        np.testing.assert_array_equal(got, np.float32([0, 0, 0, 0, -0.01, -0.01, 0.01, 0.01]))


def test_scanned_step_equals_unrolled():
    """Scanned layer groups after an unrolled prefix with a MoE layer (1 dense, 1 MoE, then
    3 groups of 2): the same step as unrolled, including each layer's expert-bias update."""
    model_cfg = CFG.replace(num_layers=8, first_k_dense_replace=1, layer_types=None, mlp_layer_types=None)
    assert layer_split(model_cfg).groups == 3 and layer_split(model_cfg).prefix == 2
    out = [run(TRAIN, make_batch(3), model_cfg=c) for c in (model_cfg, model_cfg.replace(scan_layers=False))]
    (scan, m_scan), (plain, m_plain) = out
    assert m_scan["loss/pg"] == pytest.approx(m_plain["loss/pg"], rel=1e-5, abs=1e-7)
    np.testing.assert_array_equal(m_scan["moe/load"], m_plain["moe/load"])
    got, want = by_layer(scan.params, model_cfg), flat(plain)
    assert got.keys() == want.keys()
    for p, a in want.items():
        np.testing.assert_allclose(got[p], a, atol=2e-6, err_msg=str(p))
    biases, want_b = by_layer(scan.rest, model_cfg), {p: np.asarray(v.get_value()) for p, v in
                                                       nnx.to_flat_state(plain.rest)}
    assert biases.keys() == want_b.keys() and len(want_b) == 7
    for p, b in want_b.items():
        assert np.abs(b).max() > 0, p  # every MoE layer's bias moved
        np.testing.assert_allclose(biases[p], b, atol=1e-7, err_msg=str(p))


def test_zero_advantage_rows_contribute_nothing():
    batch = make_batch(1)
    batch["advantages"][:] = 0.0
    _, metrics = run(TRAIN, batch)
    assert metrics["optim/grad_norm"] == 0.0


def test_sampler_greedy_equals_argmax_decoding():
    model = Ling(CFG, nnx.Rngs(1))
    prompts = [[5, 6, 7, 8, 9], [3, 4, 10, 11, 12]]
    out = sample(model, prompts, jax.random.PRNGKey(0),
                 SamplerConfig(max_new_tokens=12, temperature=0.0, group_size=1))
    want = np.asarray(greedy(model, jnp.asarray(prompts, jnp.int32), 12))
    got = np.asarray(out.tokens)
    for i in range(2):
        n = int(out.lengths[i])
        np.testing.assert_array_equal(got[i, :n], want[i, :n])


@pytest.mark.parametrize("scfg", [SamplerConfig(max_new_tokens=10, temperature=1.0, group_size=3),
                                  SamplerConfig(max_new_tokens=10, temperature=0.7, top_p=0.9, top_k=20,
                                                group_size=2)], ids=["t1", "t0.7-p0.9-k20"])
def test_sampled_logprobs_equal_fresh_forward(scfg):
    model = Ling(CFG, nnx.Rngs(2))
    prompts = [[5, 6, 7], [9, 10, 11, 12, 13, 14]]
    out = sample(model, prompts, jax.random.PRNGKey(3), scfg)
    assert out.tokens.shape == (len(prompts) * scfg.group_size, scfg.max_new_tokens)
    worst = 0.0
    for r in range(out.tokens.shape[0]):
        n = int(out.lengths[r])
        seq = np.concatenate([prompts[r // scfg.group_size], np.asarray(out.tokens[r, :n])])
        h, _, _ = model.hidden(jnp.asarray(seq[None, :-1], jnp.int32))
        lp, _ = token_logprobs(h, model.head_kernel(), jnp.asarray(seq[None, 1:], jnp.int32), 8,
                               scfg.temperature)
        fresh = np.asarray(lp[0, -n:])
        worst = max(worst, float(np.abs(fresh - np.asarray(out.logprobs[r, :n])).max()))
        assert np.all(np.asarray(out.logprobs[r, n:]) == 0.0)
    assert worst < 1e-4, worst
    if scfg.top_p < 1.0:
        assert np.all(np.asarray(out.sampling_logprobs) >= np.asarray(out.logprobs) - 1e-6)


def test_left_pad_rejects_empty_prompt():
    with pytest.raises(ValueError, match="at least one token"):
        left_pad([[1], []], 0)


def test_sampled_rows_do_not_depend_on_their_batch():
    """A row's draws depend on its key, its prompt's id and the policy only: sampling two
    prompts together or one call each gives the same rollouts (multi-host relies on this)."""
    model = Ling(CFG, nnx.Rngs(4))
    scfg = SamplerConfig(max_new_tokens=8, temperature=1.0, group_size=2)
    prompts = [[5, 6, 7], [9, 10, 11, 12]]
    key = jax.random.PRNGKey(11)
    both = sample(model, prompts, key, scfg, width=6, prompt_ids=[3, 4])
    for i in range(2):
        one = sample(model, prompts[i:i + 1], key, scfg, width=6, prompt_ids=[3 + i])
        np.testing.assert_array_equal(one.tokens, both.tokens[2 * i:2 * i + 2])
        np.testing.assert_allclose(one.logprobs, both.logprobs[2 * i:2 * i + 2], atol=1e-6)
    other = sample(model, prompts, key, scfg, width=6, prompt_ids=[5, 6])
    assert not np.array_equal(other.tokens, both.tokens)  # ids name the key schedule


def test_warmup_starts_from_zero_learning_rate():
    cfg = dataclasses.replace(TRAIN, warmup_steps=4)
    state, metrics = run(cfg, make_batch())
    _, init = init_state(Ling(CFG, nnx.Rngs(0)), cfg)
    assert metrics["optim/learning_rate"] == 0.0
    for p, a in flat(state).items():
        np.testing.assert_array_equal(a, flat(init)[p])  # lr 0 at step 0: nothing moves
    _, m2 = run(cfg, make_batch(), steps=3)
    assert m2["optim/learning_rate"] == pytest.approx(TRAIN.learning_rate * 2 / 4)
    cos = dataclasses.replace(TRAIN, lr_schedule="cosine", warmup_steps=1, decay_steps=4,
                              lr_end_factor=0.1)
    _, m3 = run(cos, make_batch(), steps=6)
    assert m3["optim/learning_rate"] == pytest.approx(TRAIN.learning_rate * 0.1)


def _kl_reference_np(policy: Ling, ref: Ling, batch: dict, temperature: float) -> float:
    """k3 KL(pi || pi_ref) on the batch's sampled tokens, token mean, in float64 from logits."""
    def logp(model):
        logits = np.asarray(model(jnp.asarray(batch["tokens"][:, :-1])), np.float64) / temperature
        logits -= logits.max(-1, keepdims=True)
        lse = np.log(np.exp(logits).sum(-1))
        tgt = batch["tokens"][:, 1:]
        return np.take_along_axis(logits, tgt[..., None], -1)[..., 0] - lse
    log_r = logp(ref) - logp(policy)
    m = batch["loss_mask"][:, 1:].astype(np.float64)
    return float(((np.exp(log_r) - 1.0 - log_r) * m).sum() / m.sum())


def test_kl_term_matches_a_float64_reference():
    from rcca_jax.rl.train_step import make_reference, reference_logprobs

    temperature = 0.7
    batch = make_batch(2)
    policy, ref_model = Ling(CFG, nnx.Rngs(5)), Ling(CFG, nnx.Rngs(6))
    cfg = dataclasses.replace(TRAIN, kl_coef=0.5)
    graphdef, state = init_state(policy, cfg)
    _, ref_state = init_state(ref_model, cfg)
    ref = make_reference(ref_state, jnp.float32)
    batch["ref_logp"] = np.asarray(reference_logprobs(graphdef, ref, {k: jnp.asarray(v) for k, v in batch.items()},
                                                      chunk=8, temperature=temperature))
    assert np.all(batch["ref_logp"][:, 0] == 0.0)
    micro = reference_logprobs(graphdef, ref, {k: jnp.asarray(v) for k, v in batch.items()}, chunk=8,
                               temperature=temperature, micro_batches=4)
    # Rows in place. A micro-batch's forward runs at another batch shape, whose float32 sums
    # XLA may associate differently (on CI's CPU one log-prob of 3.8 moved by 1.1e-5), so
    # the agreement is float32 rounding through the layers, not bits; a row out of place
    # would be off by O(1), as the swapped rows show.
    got = np.asarray(micro)
    np.testing.assert_allclose(got, batch["ref_logp"], rtol=0, atol=5e-5)
    assert np.abs(got[::-1] - batch["ref_logp"]).max() > 0.1
    want = _kl_reference_np(policy, ref_model, batch, temperature)  # before the step donates them
    state, fn = compile_train_step(graphdef, cfg, state, batch, temperature=temperature)
    _, metrics = fn(state, {k: jnp.asarray(v) for k, v in batch.items()})
    assert metrics["loss/kl"] == pytest.approx(want, rel=1e-4)
    assert want > 1e-3  # two different random policies: a KL that could have been 0 is no test
    # The policy against itself: the reference's log-probs are its own, and the KL is 0.
    own = make_reference(init_state(Ling(CFG, nnx.Rngs(5)), cfg)[1], jnp.float32)
    b2 = dict(batch, ref_logp=np.asarray(reference_logprobs(
        graphdef, own, {k: jnp.asarray(v) for k, v in batch.items()}, chunk=8, temperature=temperature)))
    graphdef, state = init_state(Ling(CFG, nnx.Rngs(5)), cfg)
    state, fn = compile_train_step(graphdef, cfg, state, b2, temperature=temperature)
    _, m2 = fn(state, {k: jnp.asarray(v) for k, v in b2.items()})
    assert abs(float(m2["loss/kl"])) < 1e-6


def test_kl_coef_zero_is_the_plain_step(reference_run):
    state, metrics = reference_run
    batch = make_batch()
    batch["ref_logp"] = np.random.RandomState(0).uniform(-5, -1, batch["old_logp"].shape).astype(np.float32)
    state_kl0, metrics_kl0 = run(TRAIN, batch)  # kl_coef = 0: ref_logp is ignored
    assert metrics_kl0["loss/total"] == metrics["loss/total"] and "loss/kl" not in metrics_kl0
    for p, a in flat(state).items():
        np.testing.assert_array_equal(flat(state_kl0)[p], a)
    with pytest.raises(ValueError, match="ref_logp"):
        run(dataclasses.replace(TRAIN, kl_coef=0.1), make_batch())


def test_kl_measured_at_coef_zero_is_reported_and_leaves_the_step_alone(reference_run):
    state, metrics = reference_run
    batch = make_batch()
    batch["ref_logp"] = np.random.RandomState(0).uniform(-5, -1, batch["old_logp"].shape).astype(np.float32)
    cfg = dataclasses.replace(TRAIN, kl_measure=True)
    state_m, metrics_m = run(cfg, batch)
    assert metrics_m["loss/total"] == metrics["loss/total"]
    for p, a in flat(state).items():
        np.testing.assert_array_equal(flat(state_m)[p], a)
    # Random reference log-probs are far from the policy's: a KL that could not be 0.
    assert float(metrics_m["loss/kl"]) > 0.1
    with pytest.raises(ValueError, match="ref_logp"):
        run(cfg, make_batch())


def test_weighted_step_matches_a_float64_reference():
    """The step's loss from base weights, diagnosed mask and advantages equals the method's
    objective computed in float64 from the model's logits (final weights by the sign rule)."""
    temperature = 0.8
    batch = make_batch(3)
    model = Ling(CFG, nnx.Rngs(0))
    logits = np.asarray(model(jnp.asarray(batch["tokens"][:, :-1])), np.float64) / temperature
    logits -= logits.max(-1, keepdims=True)
    logp = np.take_along_axis(logits, batch["tokens"][:, 1:, None], -1)[..., 0] - np.log(np.exp(logits).sum(-1))
    adv = batch["advantages"].astype(np.float64)
    w = np.where(adv[:, None] < 0, batch["weights_base"][:, 1:],
                 np.where(batch["diagnosed"][:, 1:], 1.0, 1.2))
    ratio = np.exp(logp - batch["old_logp"][:, 1:])
    obj = np.minimum(ratio * w * adv[:, None], np.clip(ratio, 0.8, 1.2) * w * adv[:, None])
    m = batch["loss_mask"][:, 1:].astype(np.float64)
    per_seq = (obj * m).sum(-1) / np.maximum(m.sum(-1), 1)
    want = -per_seq[m.sum(-1) > 0].mean()
    graphdef, state = init_state(model, TRAIN)
    state, fn = compile_train_step(graphdef, TRAIN, state, batch, temperature=temperature)
    _, metrics = fn(state, {k: jnp.asarray(v) for k, v in batch.items()})
    assert metrics["loss/pg"] == pytest.approx(want, rel=1e-5, abs=1e-7)
    assert abs(want) > 1e-3
    dir_neg = batch["diagnosed"][:, 1:] & (adv[:, None] < 0) & (m > 0)
    assert metrics["weights/mean_dir"] == pytest.approx(batch["weights_base"][:, 1:][dir_neg].mean(), rel=1e-5)
    # Entropy of the tempered policy, over diagnosed and other loss tokens apart.
    p = np.exp(logits - np.log(np.exp(logits).sum(-1, keepdims=True)))
    ent = -(p * np.log(p)).sum(-1)
    diag = batch["diagnosed"][:, 1:] & (m > 0)
    other = ~batch["diagnosed"][:, 1:] & (m > 0)
    assert diag.any() and other.any()
    assert metrics["policy/entropy_diagnosed"] == pytest.approx(ent[diag].mean(), rel=1e-4)
    assert metrics["policy/entropy_other"] == pytest.approx(ent[other].mean(), rel=1e-4)
