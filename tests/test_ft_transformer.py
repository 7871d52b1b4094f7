"""The FT-Transformer encoder (``pretrain.encoder: ft_transformer``): its tokens, masking, output,
pretraining as a stack of one with seeded dropout, and checkpoints read back by ``encode``."""

import dataclasses

import numpy as np
import torch

from seba.core.config import PretrainConfig
from seba.ft_transformer import FTTransformer, StackedFTTransformer, ffn_hidden
from seba.model import Encoder, StackedEncoder
from seba.objective import stacked_feature_view
from seba.pretrain import (SeedData, build_models, encode, encoder_config, member_bytes, plan_stacks,
                           pretrain_encoder, pretrain_stack, stack_encoders)
from seba.core.runtime import save_checkpoint

CPU = torch.device("cpu")
SMALL_FT = dict(encoder="ft_transformer", ft_dim=16, ft_heads=4, ft_blocks=2, encoder_out=16,
                projector_hidden=32, projector_out=16, batch_size=64, progress_seconds=1e9)


def small_cfg(**kw):
    return dataclasses.replace(PretrainConfig(), **{**SMALL_FT, **kw})


def small_model(n_features=7, **kw):
    torch.manual_seed(0)
    return FTTransformer(n_features, 16, d=16, n_blocks=2, n_heads=4, **kw)


def toy_table(n=240, columns=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, columns)) * 3
    X = np.concatenate([c + rng.normal(size=(n // 3, columns)) for c in centres]).astype(np.float32)
    return X, np.arange(columns)


def test_shapes_tokens_and_configuration():
    model = small_model()
    x = torch.randn(5, 7)
    tokens = model.tokenizer(x)
    assert tokens.shape == (5, 7 + 1, 16)  # one token per column and the CLS token
    h = model(x)
    assert h.shape == (5, 16) and (h >= 0).all()
    assert small_model(out_relu=False)(x).lt(0).any()  # without the output ReLU
    block = model.blocks[1]
    assert model.blocks[0].attention_norm is None and block.attention_norm is not None  # first block: no norm
    assert block.ffn[0].out_features == 2 * ffn_hidden(16) and block.ffn[3].in_features == ffn_hidden(16)
    assert ffn_hidden(192) == 256  # rtdl's default: d * 4 / 3
    assert [type(m).__name__ for m in model.head] == ["LayerNorm", "ReLU", "Linear", "ReLU"]
    stacked = StackedFTTransformer(model).eval()
    assert torch.equal(stacked(x.unsqueeze(0))[0], model.eval()(x))
    assert {k: v.shape[1:] for k, v in stacked.stacked_state().items()} == \
        {k: v.shape for k, v in model.state_dict().items()}


def test_a_masked_column_enters_as_its_bias_token():
    model = small_model().eval()
    x = torch.randn(6, 7)
    x[:, 2] = 0.0
    tokens = model.tokenizer(x)
    assert torch.equal(tokens[:, 2], model.tokenizer.bias[2].detach().expand(6, -1))
    # through SeBA's feature view: once a column is masked its value cannot reach the encoder
    mask = torch.zeros(1, 7, dtype=torch.bool)
    mask[0, 4] = True
    a, b, c = torch.randn(3, 1, 6, 7).unbind(0)
    b[..., :] = a
    b[..., 4] += 5.0  # the masked column differs
    c[..., :] = a
    c[..., 1] += 5.0  # an unmasked column differs
    with torch.no_grad():
        out = [model(stacked_feature_view(v, mask)[0]) for v in (a, b, c)]
    assert torch.equal(out[0], out[1])
    assert not torch.allclose(out[0], out[2])


def test_eval_mode_is_deterministic_and_training_mode_drops_out():
    model = small_model()
    x = torch.randn(16, 7)
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    assert not torch.equal(model(x), model(x))  # attention and FFN dropout
    quiet = small_model(attention_dropout=0.0, ffn_dropout=0.0).train()
    assert torch.equal(quiet(x), quiet(x))


def test_pretraining_learns_and_the_checkpoint_round_trips_through_encode(tmp_path):
    X, groups = toy_table()
    cfg = small_cfg(max_epochs=8, patience=8)
    result = pretrain_encoder(X[:200], X[200:], groups, 0.3, seed=1, cfg=cfg, device=CPU)
    assert result.train_loss[-1] < result.train_loss[0]
    assert result.stack_size == 1 and not result.cuda_graphs
    model_config = encoder_config(cfg, X.shape[1])
    assert model_config["encoder"] == "ft_transformer" and model_config["ft_dim"] == 16
    save_checkpoint({"encoder": result.encoder_state, "model_config": model_config}, tmp_path / "seed1.pt")
    checkpoint = torch.load(tmp_path / "seed1.pt", map_location="cpu", weights_only=True)
    features = encode(checkpoint["encoder"], checkpoint["model_config"], X, CPU, batch_size=64)
    model = FTTransformer(X.shape[1], 16, d=16, n_blocks=2, n_heads=4)
    model.load_state_dict(result.encoder_state)
    with torch.no_grad():
        expected = model.eval()(torch.as_tensor(X))
    assert features.shape == (len(X), 16)
    torch.testing.assert_close(features, expected, rtol=1e-5, atol=1e-6)


def test_a_seed_depends_on_its_own_seed_alone():
    X, groups = toy_table()
    cfg = small_cfg(max_epochs=3, patience=3, fill="marginal")
    state = torch.get_rng_state()
    a = pretrain_encoder(X[:200], X[200:], groups, 0.3, seed=2, cfg=cfg, device=CPU)
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is restored
    torch.manual_seed(123)  # whatever the global generator holds
    b = pretrain_encoder(X[:200], X[200:], groups, 0.3, seed=2, cfg=cfg, device=CPU)
    # two seeds asked for as one stack train as stacks of one, in turn
    other, same = pretrain_stack([SeedData(X[:200], X[200:], 3), SeedData(X[:200], X[200:], 2)], groups, 0.3,
                                 cfg, CPU)
    for r in (b, same):
        assert r.train_loss == a.train_loss and r.val_loss == a.val_loss
        assert all(torch.equal(r.encoder_state[k], a.encoder_state[k]) for k in a.encoder_state)
    assert not torch.equal(other.encoder_state["tokenizer.weight"], a.encoder_state["tokenizer.weight"])


def test_the_mlp_default_is_unchanged_and_ft_plans_stacks_of_one():
    cfg = dataclasses.replace(PretrainConfig(), encoder_hidden=32, encoder_out=16)
    assert cfg.encoder == "mlp"
    encoder, _ = build_models(9, cfg, 0)
    assert type(encoder) is Encoder and isinstance(stack_encoders([encoder, encoder]), StackedEncoder)
    assert encoder_config(cfg, 9) == {"encoder": "mlp", "in_features": 9, "encoder_out": 16,
                                      "encoder_out_relu": True, "encoder_hidden": 32}
    # a checkpoint written before the encoder switch (no 'encoder' key) is an MLP's
    old = {"in_features": 9, "encoder_hidden": 32, "encoder_out": 16, "encoder_out_relu": True}
    x = np.random.default_rng(0).normal(size=(4, 9)).astype(np.float32)
    with torch.no_grad():
        expected = encoder.eval()(torch.as_tensor(x))
    assert torch.equal(encode(encoder.state_dict(), old, x, CPU), expected)
    ft = small_cfg()
    assert plan_stacks(4, 1, 100, ft, CPU, free_bytes=10_000) == [[0], [1], [2], [3]]
    assert plan_stacks(4, 1, 100, cfg, CPU, free_bytes=10_000) == [[0, 1, 2, 3]]
    # the FT estimate grows with the attention: B x heads x (columns + 1)^2 per block
    base = member_bytes(1000, 100, 20, ft)
    assert member_bytes(1000, 100, 40, ft) > 2 * base
    assert member_bytes(1000, 100, 20, dataclasses.replace(ft, ft_heads=8)) > base
    assert member_bytes(1000, 100, 20, dataclasses.replace(ft, ft_blocks=3)) > base


def test_bf16_autocast_trains_as_for_the_mlp():
    X, groups = toy_table(n=120)
    result = pretrain_encoder(X[:100], X[100:], groups, 0.3, seed=0, cfg=small_cfg(precision="bf16", max_epochs=2),
                              device=CPU)
    assert result.precision == "bf16" and len(result.train_loss) == 2
    assert all(np.isfinite(result.train_loss + result.val_loss))
    assert all(v.dtype == torch.float32 for v in result.encoder_state.values())  # fp32 weights
