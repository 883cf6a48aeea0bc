"""Presets of published models and the parameter-count formula: the formula agrees with the
Modules for drawn variants of every family, and with the published counts of BERT; the
pooler (BERT's tanh on [CLS]) has its gradient checked."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer import init
from minitransformer.functional.pooler import pooler_backward, pooler_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.blocks import EncoderBlock
from minitransformer.models import (GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig,
                                    TabularConfig, TabularTransformer, ViT, ViTConfig)
from minitransformer.models.presets import PRESETS, count_parameters, preset
from strategies import head_counts, integer_ids, normal_array, seeds

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


@pytest.fixture
def shapes_only(monkeypatch):
    """Modules built with uninitialised weights (np.empty: no random draw, pages untouched):
    the shapes, hence the count, are those of the real model, at a fraction of the cost."""
    monkeypatch.setattr(init, "normal", lambda rng, shape, std, dtype=np.float32: np.empty(shape, dtype))


@st.composite
def architectures(draw):
    H, G = draw(head_counts(max_heads=4))
    return dict(n_head=H, n_kv_head=G, d_model=H * draw(st.sampled_from([2, 4])),
                n_layer=draw(st.integers(1, 3)), d_ff=draw(st.sampled_from([None, 6])),
                norm=draw(st.sampled_from(["layernorm", "rmsnorm"])),
                norm_position=draw(st.sampled_from(["pre", "post"])),
                activation=draw(st.sampled_from(["relu", "gelu", "swiglu", "geglu"])),
                bias=draw(st.booleans()))


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "none", "shaw", "t5"])  # each for sure
@settings(max_examples=4)
@given(arch=architectures(),
       extras=st.fixed_dictionaries({"type_vocab_size": st.integers(0, 2), "embedding_norm": st.booleans(),
                                     "mlm_head": st.booleans(), "pooler": st.booleans(),
                                     "n_classes": st.integers(0, 3), "tie_weights": st.booleans(),
                                     "shared_embeddings": st.booleans()}))
def test_formula_equals_the_built_model_for_drawn_variants(arch, position, extras):
    common = dict(vocab_size=11, block_size=6, position=position, **arch)
    encoder = EncoderConfig(**common, **{k: extras[k] for k in ("type_vocab_size", "embedding_norm",
                                                                "mlm_head", "pooler", "n_classes")})
    gpt = GPTConfig(**common, tie_weights=extras["tie_weights"])
    shared = extras["shared_embeddings"]
    seq2seq = Seq2SeqConfig(**{**common, "position": "sinusoidal" if position in ("rope", "alibi") else position},
                            src_vocab_size=None if shared else 7, shared_embeddings=shared)
    for model_class, config in ((Encoder, encoder), (GPT, gpt), (Seq2Seq, seq2seq)):
        assert count_parameters(config) == model_class(config, rng=0).num_parameters(), config


@settings(max_examples=10)
@given(arch=architectures(), n_classes=st.integers(2, 4), grid=st.integers(1, 3), p=st.integers(1, 3),
       n_numeric=st.integers(0, 3), cardinalities=st.lists(st.integers(1, 4), max_size=3))
def test_formula_equals_the_built_model_for_vit_and_tabular(arch, n_classes, grid, p, n_numeric, cardinalities):
    arch.pop("n_kv_head")
    vit = ViTConfig(n_classes=n_classes, image_size=grid * p, patch_size=p, in_channels=2, **arch)
    assert count_parameters(vit) == ViT(vit).num_parameters()
    if n_numeric + len(cardinalities):
        tab = TabularConfig(n_classes=n_classes, n_numeric=n_numeric, cardinalities=tuple(cardinalities), **arch)
        assert count_parameters(tab) == TabularTransformer(tab).num_parameters()


def test_published_counts_by_formula():
    assert count_parameters(preset("bert-base")) == 109_482_240          # Hugging Face BertModel
    assert count_parameters(preset("bert-large")) == 335_141_888
    # The original base Transformer: 63.1M with one shared 37000-token vocabulary (the paper: 65M)
    assert count_parameters(preset("transformer-base")) == 63_082_496
    assert count_parameters(preset("bert-base", pooler=False)) == 109_482_240 - (768 * 768 + 768)


def test_bert_base_built_whole_has_the_published_count(shapes_only):
    model = Encoder(preset("bert-base"))
    assert model.num_parameters() == 109_482_240
    assert "pool_head" in model.children and "mlm_head" not in model.children


def test_bert_large_built_from_its_parts_has_the_published_count(shapes_only):
    # The whole model is 1.3 GB of float32: build the embeddings + pooler + one block, and one more
    # block on its own, which the other 22 repeat (every block has the same shapes).
    config = preset("bert-large")
    one_layer = Encoder(preset("bert-large", n_layer=1)).num_parameters()
    block = EncoderBlock(config.block_spec(causal=False)).num_parameters()
    assert one_layer + 23 * block == 335_141_888 == count_parameters(config)


def test_transformer_base_built_whole_matches_the_formula(shapes_only):
    model = Seq2Seq(preset("transformer-base"))
    assert model.num_parameters() == 63_082_496
    assert model.decoder.head.W is model.encoder.embed.tok.W              # one matrix, counted once


def test_presets_are_the_papers_architectures_and_refuse_unknown_names():
    base, large, original = preset("bert-base"), preset("bert-large"), preset("transformer-base")
    assert (base.n_layer, base.d_model, base.n_head, base.d_ff) == (12, 768, 12, 3072)
    assert (large.n_layer, large.d_model, large.n_head, large.d_ff) == (24, 1024, 16, 4096)
    assert (base.vocab_size, base.block_size, base.type_vocab_size, base.eps) == (30522, 512, 2, 1e-12)
    assert (original.n_layer, original.d_model, original.n_head, original.d_ff) == (6, 512, 8, 2048)
    assert (original.vocab_size, original.shared_embeddings, original.position) == (37000, True, "sinusoidal")
    assert preset("bert-base", p_drop=0.0).p_drop == 0.0
    with pytest.raises(ValueError, match="name: expected one of"):
        preset("gpt-5")
    with pytest.raises(ValueError, match="d_model: expected a multiple of n_head"):
        preset("bert-base", n_head=7)
    assert {"transformer-base", "bert-base", "bert-large", "gpt2-small", "llama-2-7b", "llama-2-70b", "albert-base",
            "distilbert", "t5-base", "electra-base-discriminator", "electra-small-discriminator"} == set(PRESETS)


@given(B=st.integers(1, 3), S=st.integers(1, 4), C=st.integers(1, 4), seed=seeds)
def test_pooler_pair_gradients_and_only_position_zero(B, S, C, seed):
    inputs = {"h": normal_array(seed, (B, S, C)), "W": normal_array(seed + 1, (C, C)),
              "b": normal_array(seed + 2, (C,))}
    result = check_pair(pooler_forward, pooler_backward, inputs, seed=seed, tol=TOL)
    assert result.ok, str(result)
    pooled, cache = pooler_forward(**inputs)
    np.testing.assert_allclose(pooled, np.tanh(inputs["h"][:, 0] @ inputs["W"] + inputs["b"]), rtol=1e-14)
    dh, _, _ = pooler_backward(normal_array(seed + 3, (B, C)), cache)
    assert not dh[:, 1:].any()


@settings(max_examples=5)
@given(head=st.sampled_from(["pool", "cls"]), seed=seeds)
def test_encoder_with_pooler_gradients_through_the_pool_and_cls_heads(head, seed):
    config = EncoderConfig(vocab_size=9, block_size=5, n_layer=1, n_head=2, d_model=8, type_vocab_size=2,
                           pooler=True, n_classes=3, mlm_head=False)
    model = Encoder(config, rng=seed).astype(np.float64)
    ids = integer_ids(seed, (2, 5), 9)
    result = check_module(model, ids, forward_kwargs={"head": head}, seed=seed, max_coords=8, tol=TOL)
    assert result.ok, str(result)
    pooled = model.forward(ids, head="pool")
    hidden = model.forward(ids)
    np.testing.assert_allclose(pooled, np.tanh(hidden[:, 0] @ model.pool_head.W + model.pool_head.b), rtol=1e-12)
    logits = model.forward(ids, head="cls")                               # BERT's classifier reads the pooled
    np.testing.assert_allclose(logits, pooled @ model.cls_head.W + model.cls_head.b, rtol=1e-12)
    model.release_caches()
    with pytest.raises(ValueError, match="head: this encoder has no 'pool' head"):
        Encoder(EncoderConfig(vocab_size=9, block_size=5, n_layer=1, n_head=2, d_model=8)).forward(ids, head="pool")


def test_pooler_runs_on_a_non_numpy_backend():
    """The pooled classifier's training steps on the strict array type (tests/test_backend_agnostic.py)."""
    from test_backend_agnostic import F32, SMALL, _two_steps
    cfg = EncoderConfig(**SMALL, type_vocab_size=2, pooler=True, n_classes=3, mlm_head=False)
    ids = np.random.default_rng(0).integers(0, 11, (2, 6))
    _two_steps(lambda: Encoder(cfg, rng=0), lambda model, b: (model.forward(b[0], head="cls"), b[1]),
               [(ids, np.array([0, 2]))] * 2, F32)


# ------------------------------------------------------- notable models: published counts
# Every number below is copied from a published source named beside it, never computed by the
# code under test. KerasHub's preset tables (keras_hub/src/models/<family>/<family>_presets.py,
# "params") list the backbones; Hugging Face's model cards and num_parameters() agree.
def test_gpt2_small_has_the_published_count():
    # GPT-2 small (124M): 124,439,808, KerasHub gpt2_base_en and Hugging Face "gpt2" (tied head)
    assert count_parameters(preset("gpt2-small")) == 124_439_808


def test_llama_2_has_the_published_counts():
    # Hugging Face meta-llama/Llama-2-7b-hf, KerasHub llama2_7b_en: 6,738,415,616
    assert count_parameters(preset("llama-2-7b")) == 6_738_415_616
    # Hugging Face meta-llama/Llama-2-70b-hf: 68,976,648,192 (GQA: 8 kv heads of 128)
    assert count_parameters(preset("llama-2-70b")) == 68_976_648_192
    config = preset("llama-2-7b")
    assert (config.norm, config.activation, config.position, config.bias, config.tie_weights) == \
        ("rmsnorm", "swiglu", "rope", False, False)


def test_albert_distilbert_t5_have_the_published_counts():
    # KerasHub albert_base_en_uncased: 11,683,584 (= Hugging Face AlbertModel, albert-base-v2)
    assert count_parameters(preset("albert-base")) == 11_683_584
    # KerasHub distil_bert_base_en_uncased: 66,362,880 (= Hugging Face DistilBertModel)
    assert count_parameters(preset("distilbert")) == 66_362_880
    # KerasHub t5_base_multi: 222,903,552 (= Hugging Face T5Model t5-base, lm_head tied)
    assert count_parameters(preset("t5-base")) == 222_903_552


def test_electra_discriminators_have_the_published_counts():
    # KerasHub electra_base_discriminator_uncased_en: 109,482,240, and
    # electra_small_discriminator_uncased_en: 13,548,800; both backbones hold BERT's pooler
    # (dense C -> C), which ElectraForPreTraining replaces with the discriminator head:
    # dense C -> C (C² + C) and the logit C -> 1 (C + 1).
    base, small = preset("electra-base-discriminator"), preset("electra-small-discriminator")
    assert count_parameters(preset("electra-base-discriminator", rtd_head=False, pooler=True)) == 109_482_240
    assert count_parameters(preset("electra-small-discriminator", rtd_head=False, pooler=True)) == 13_548_800
    assert count_parameters(base) == 109_482_240 + (768 + 1)
    assert count_parameters(small) == 13_548_800 + (256 + 1)


def test_albert_base_built_whole_has_the_published_count(shapes_only):
    model = Encoder(preset("albert-base"))
    assert model.num_parameters() == 11_683_584
    assert model.blocks[11].ffn.sublayer.fc_in.W is model.blocks[0].ffn.sublayer.fc_in.W   # one block, shared
    assert model.embed.tok.W.shape == (30000, 128) and model.embed_proj.W.shape == (128, 768)


def test_t5_base_shares_one_relative_table_per_stack(shapes_only):
    config = preset("t5-base", n_layer=2)
    model = Seq2Seq(config)
    assert model.num_parameters() == count_parameters(config)
    for stack in (model.encoder, model.decoder):
        first, second = (b.attn.sublayer.rel_bias for b in stack.blocks)
        assert first is second and first.shape == (32, 12)
    assert model.encoder.blocks[0].attn.sublayer.rel_bias is not model.decoder.blocks[0].attn.sublayer.rel_bias


@settings(max_examples=6)
@given(arch=architectures(), embed_dim=st.sampled_from([None, 3]), share_layers=st.booleans(),
       rtd_head=st.booleans(), mlm_head=st.booleans())
def test_formula_equals_the_built_model_with_albert_and_electra_fields(arch, embed_dim, share_layers, rtd_head,
                                                                       mlm_head):
    config = EncoderConfig(vocab_size=11, block_size=6, embed_dim=embed_dim, share_layers=share_layers,
                           rtd_head=rtd_head, mlm_head=mlm_head, type_vocab_size=2, **arch)
    assert count_parameters(config) == Encoder(config, rng=0).num_parameters()
    t5 = Seq2SeqConfig(vocab_size=11, block_size=6, position="t5", relative_buckets=4, relative_max_distance=8,
                       share_relative_bias=True, **arch)
    assert count_parameters(t5) == Seq2Seq(t5, rng=0).num_parameters()


@settings(max_examples=5)
@given(head=st.sampled_from(["mlm", "rtd"]), seed=seeds)
def test_albert_and_electra_gradients_through_shared_blocks_and_the_projection(head, seed):
    # Every block reuses block 0's arrays: its gradient is the sum over the layers, which
    # the central differences (perturbing the one shared array) see as well. init_std 0.4, as in
    # the whole-GPT check of gradcheck/suite.py: at 0.02 the attention is nearly uniform and
    # dW_qkv ~ 1e-4, where the central differences' round-off (~1e-10) is 1e-6 of it.
    config = EncoderConfig(vocab_size=9, block_size=5, n_layer=3, n_head=2, d_model=8, embed_dim=4,
                           share_layers=True, rtd_head=True, type_vocab_size=2, init_std=0.4)
    model = Encoder(config, rng=seed).astype(np.float64)
    ids = integer_ids(seed, (2, 5), 9)
    result = check_module(model, ids, forward_kwargs={"head": head}, seed=seed, max_coords=8, tol=TOL)
    assert result.ok, str(result)
    assert model.forward(ids, head="rtd").shape == (2, 5)
    model.release_caches()


def test_share_relative_bias_needs_t5_positions():
    with pytest.raises(ValueError, match="share_relative_bias: .*expected position='t5'"):
        Seq2SeqConfig(position="sinusoidal", share_relative_bias=True)
    with pytest.raises(ValueError, match=r"embed_dim: expected an integer in \[1"):
        EncoderConfig(embed_dim=0)
    with pytest.raises(TypeError, match="share_layers: expected True or False"):
        EncoderConfig(share_layers=1)
