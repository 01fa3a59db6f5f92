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
from rcca_jax.rl.sampler import SamplerConfig, left_pad, sample
from rcca_jax.rl.train_step import TrainConfig, compile_train_step, global_batch, init_state

CFG = LingConfig(vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                 num_layers=2, num_heads=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
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
        "weights": rs.uniform(1, 4, (b, t)).astype(np.float32),
    }


def run(cfg: TrainConfig, batch, mesh=None, steps=1):
    graphdef, state = init_state(Ling(CFG, nnx.Rngs(0)), cfg)
    state, fn = compile_train_step(graphdef, cfg, state, batch, mesh)
    b = global_batch(batch, mesh) if mesh is not None else {k: jnp.asarray(v) for k, v in batch.items()}
    for _ in range(steps):
        state, metrics = fn(state, b)
    return state, jax.device_get(metrics)


def flat(state):
    return {p: np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state.params)}


@pytest.fixture(scope="module")
def reference_run():
    return run(TRAIN, make_batch())


def test_step_changes_params_and_reports_metrics(reference_run):
    state, metrics = reference_run
    for key in ("loss/pg", "clip/low_frac", "clip/high_frac", "ratio/mean", "policy/entropy",
                "optim/grad_norm", "moe/load_max_over_mean"):
        assert np.isfinite(metrics[key]), key
    assert metrics["moe/load"].shape == (2, CFG.num_experts)
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
    bias = [np.asarray(v.get_value()) for _, v in nnx.to_flat_state(state.rest)]
    for layer_load, b in zip(load, bias):
        over, under = layer_load > layer_load.mean(), layer_load < layer_load.mean()
        assert over.any() and under.any()
        assert b[over].max() < b[under].min()
        assert abs(b.sum()) < 1e-6  # zero-mean option


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
