"""Fuzz entrances with near misses: relative positions (Shaw, T5),
the ViT and tabular pieces (patches, [CLS], grid positions, feature tokenizer, pooler) and their
Modules, sparse masks, attention dropout, RoPE interpolation, the sink cache and streaming, the
ViT and tabular models, configs and presets, recomputation, the training helpers and their CLI flags.

Same mechanism as tests/test_entrances_pairs_modules_cli.py (its helpers are reused): each entrance names
its arguments and a good value for each; Hypothesis replaces one or two by a malformed value and
only a ValueError/TypeError naming a replaced argument may come out; the CLI exits 2 with one line
naming the flag. FUZZ_EXAMPLES=N (environment) draws N examples per entrance instead of 15.
"""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minitransformer.functional import attention, cls_token, feature_tokenizer, grid_positions, masks
from minitransformer.functional import patches, pooler, rope, shaw, t5_bias
from test_entrances_pairs_modules_cli import (FAST, _module_backward, _module_forward, _pair, _tmp,
                                      assert_one_line_error, entrance, f32, ids, junk, refuses, run_cli,
                                      run_in_scratch_dir)


def near_misses(good):
    """Arrays one step from ``good``: another float dtype, an int or bool array, one axis one longer
    or shorter, one axis fewer or more, NaN/inf entries (no meaning for some, a named refusal for none)."""
    out = [good.astype(np.float64), good.astype(np.float16), good.astype(np.int64), good > 0, good[..., :-1],
           np.concatenate([good, good[..., :1]], axis=-1), good[None], good[0], good[..., None]]
    if good.ndim >= 2:
        out += [good[:, :-1], good.swapaxes(0, -1).copy()]
    return out


def near_miss_entrance(fn, good, keys, names=None, extra=()):
    """fn(**good()) with one of ``keys`` replaced by a near miss of its good value."""
    def run(d):
        kwargs = good()
        key = d.draw(st.sampled_from(keys))
        kwargs[key] = d.draw(st.sampled_from(near_misses(np.asarray(kwargs[key]))))
        refuses(lambda: fn(**kwargs), [(names or {}).get(key, key), *extra])
    return run


def near_miss_backward(make, inputs, dout_names=("dout", "dy", "dP", "dx", "dZ", "dT", "dpooled", "dlogits")):
    """module.forward(*inputs()) then module.backward(a near miss of the forward output)."""
    def run(d):
        module = make()
        out = module.forward(*inputs())
        refuses(lambda: module.backward(d.draw(st.sampled_from(near_misses(np.asarray(out))))), list(dout_names))
    return run


# ------------------------------------------------------------------ functional pairs
def _functional():
    yield "relative_index", entrance(shaw.relative_index, lambda: {"T": 3, "S": 4, "clip": 2})
    yield from _pair("shaw_attention", shaw.shaw_attention_forward, shaw.shaw_attention_backward,
                     lambda: {"q": f32(1, 2, 3, 4), "k": f32(1, 2, 3, 4), "v": f32(1, 2, 3, 4),
                              "table_K": f32(5, 4), "table_V": f32(5, 4), "mask": masks.causal_mask(3)}, "do")
    yield "relative_position_bucket", entrance(t5_bias.relative_position_bucket, lambda: {
        "relative_position": np.arange(-3, 4), "bidirectional": True, "n_buckets": 8, "max_distance": 16})
    yield "check_bucket_options", entrance(t5_bias.check_bucket_options, lambda: {
        "bidirectional": False, "n_buckets": 8, "max_distance": 16})
    yield from _pair("t5_bias", t5_bias.t5_bias_forward, t5_bias.t5_bias_backward,
                     lambda: {"table": f32(8, 2), "T": 3, "S": 4, "bidirectional": True, "max_distance": 16},
                     "dbias", extra=["n_buckets"])
    yield "patchify", entrance(patches.patchify, lambda: {"images": f32(2, 4, 4, 1), "patch_size": 2})
    yield "unpatchify", entrance(patches.unpatchify, lambda: {"X": f32(2, 4, 4), "image_shape": (4, 4, 1),
                                                              "patch_size": 2})
    yield "check_patch_grid", entrance(lambda H, W, p: patches.check_patch_grid("images", H, W, p),
                                       lambda: {"H": 4, "W": 4, "p": 2}, names={"p": "patch_size"},
                                       extra=["images"])
    yield from _pair("patch_embed", patches.patch_embed_forward, patches.patch_embed_backward,
                     lambda: {"images": f32(2, 4, 4, 1), "W": f32(4, 8), "b": f32(8), "patch_size": 2}, "dy")
    yield from _pair("prepend_cls", cls_token.prepend_cls_forward, cls_token.prepend_cls_backward,
                     lambda: {"x": f32(2, 3, 4), "cls": f32(4)}, "dout")
    yield from _pair("grid_positions", grid_positions.grid_positions_forward, grid_positions.grid_positions_backward,
                     lambda: {"E_row": f32(2, 4), "E_col": f32(3, 4), "e_cls": f32(4)}, "dP")
    yield "category_offsets", entrance(feature_tokenizer.category_offsets, lambda: {"cardinalities": (3, 2)})
    yield from _pair("feature_tokenizer", feature_tokenizer.feature_tokenizer_forward,
                     feature_tokenizer.feature_tokenizer_backward,
                     lambda: {"x_num": f32(2, 2), "x_cat": np.array([[0, 1], [2, 0]]), "W_num": f32(2, 4),
                              "b_num": f32(2, 4), "E": f32(5, 4), "cardinalities": (3, 2)}, "dT")
    yield from _pair("pooler", pooler.pooler_forward, pooler.pooler_backward,
                     lambda: {"h": f32(2, 3, 4), "W": f32(4, 4), "b": f32(4)}, "dpooled")
    yield "dilated_window_mask", entrance(masks.dilated_window_mask, lambda: {"T": 4, "window": 2, "dilation": 2,
                                                                              "S": 5})
    yield "global_window_mask", entrance(masks.global_window_mask, lambda: {"T": 4, "window": 2,
                                                                            "global_positions": [0], "S": 5})
    yield "check_sparse_pattern(dilation)", entrance(masks.check_sparse_pattern, lambda: {
        "window": 2, "dilation": 2, "global_positions": []})
    yield "check_sparse_pattern(global)", entrance(masks.check_sparse_pattern, lambda: {
        "window": 2, "dilation": 1, "global_positions": [0]})
    yield from _pair("attention(p_drop)", attention.attention_forward, attention.attention_backward,
                     lambda: {"q": f32(1, 2, 3, 4), "k": f32(1, 2, 3, 4), "v": f32(1, 2, 3, 4),
                              "mask": masks.causal_mask(3), "p_drop": 0.5, "rng": np.random.default_rng(0),
                              "training": True}, "dout")
    yield "attention_forward(drop_mask)", entrance(
        attention.attention_forward, lambda: {"q": f32(1, 2, 3, 4), "k": f32(1, 2, 3, 4), "v": f32(1, 2, 3, 4),
                                              "p_drop": 0.5, "drop_mask": np.ones((1, 2, 3, 3), bool)}, extra=["rng"])
    yield from _pair("rope(scale)", rope.rope_forward, rope.rope_backward,
                     lambda: {"x": f32(1, 2, 3, 4), "offset": 0, "base": 10000.0, "layout": "half", "scale": 2.0})


# ------------------------------------------------------------------ Modules
def _module_entrances():
    from minitransformer.generation import sink_cache
    from minitransformer.layers.cls_token import ClsToken
    from minitransformer.layers.feature_tokenizer import FeatureTokenizer
    from minitransformer.layers.grid_positions import GridPositionEmbedding
    from minitransformer.layers.patch_embedding import PatchEmbedding
    from minitransformer.layers.pooler import Pooler
    mods = {
        "PatchEmbedding": (PatchEmbedding, {"patch_size": 2, "in_channels": 1, "d_model": 8, "rng": 0},
                           lambda: (f32(2, 4, 4, 1),), "images"),
        "ClsToken": (ClsToken, {"d_model": 4, "rng": 0}, lambda: (f32(2, 3, 4),), "x"),
        "FeatureTokenizer": (FeatureTokenizer, {"n_numeric": 2, "cardinalities": (3, 2), "d_model": 4, "rng": 0},
                             lambda: (f32(2, 2), np.array([[0, 1], [2, 0]])), "x_num"),
        "Pooler": (Pooler, {"d_model": 4, "rng": 0}, lambda: (f32(2, 3, 4),), "h"),
    }
    for name, (cls, kwargs, inputs, arg) in mods.items():
        yield f"{name}()", entrance(cls, lambda kwargs=kwargs: dict(kwargs))
        names = ["x_num", "x_cat"] if name == "FeatureTokenizer" else None
        yield f"{name}.forward", _module_forward(cls, kwargs, arg, inputs, names=names)
        yield f"{name}.backward", _module_backward(cls, kwargs, inputs)
    for name, (cls, kwargs, inputs, arg) in mods.items():
        yield f"{name}.backward(near miss)", near_miss_backward(lambda cls=cls, kwargs=kwargs: cls(**kwargs), inputs)
    yield "PatchEmbedding.forward(near miss)", near_miss_entrance(
        lambda images: PatchEmbedding(2, 1, 8, rng=0).forward(images), lambda: {"images": f32(2, 4, 4, 1)},
        ["images"])
    yield "FeatureTokenizer.forward(near miss)", near_miss_entrance(
        lambda x_num, x_cat: FeatureTokenizer(2, (3, 2), 4, rng=0).forward(x_num, x_cat),
        lambda: {"x_num": f32(2, 2), "x_cat": np.array([[0, 1], [2, 0]])}, ["x_num", "x_cat"])
    from minitransformer.layers import (Causal, DilatedWindow, GlobalWindow, MultiHeadAttention, RoPE, Shaw,
                                        SlidingWindow, T5Bias)
    yield "MultiHeadAttention(shaw, dilation)", entrance(MultiHeadAttention, lambda: {
        "d_model": 8, "n_head": 2, "rng": 0, "positions": Shaw(2), "pattern": DilatedWindow(2, 2)},
        extra=["positions", "pattern"])
    yield "MultiHeadAttention(t5, global)", entrance(MultiHeadAttention, lambda: {
        "d_model": 8, "n_head": 2, "rng": 0, "positions": T5Bias(False, 8, 16), "pattern": GlobalWindow(2, [0])},
        extra=["positions", "pattern"])
    yield "MultiHeadAttention(rope_scale, attn_p_drop)", entrance(MultiHeadAttention, lambda: {
        "d_model": 8, "n_head": 2, "positions": RoPE(scale=2.0), "rng": 0, "attn_p_drop": 0.1, "dropout_rng": 0},
        extra=["positions"])
    for cls, good in ((RoPE, {"layout": "half", "base": 500.0, "scale": 2.0}), (Shaw, {"clip": 2}),
                      (T5Bias, {"bidirectional": False, "n_buckets": 8, "max_distance": 16}),
                      (SlidingWindow, {"window": 3}), (DilatedWindow, {"window": 3, "dilation": 2}),
                      (GlobalWindow, {"window": 3, "global_positions": [0, 4]})):
        yield f"{cls.__name__}()", entrance(cls, lambda good=good: dict(good),
                                            extra=["global_positions[", "n_buckets", "max_distance"])
    for kind, positions in (("shaw", Shaw), ("t5", lambda: T5Bias(bidirectional=False))):
        kw = {"d_model": 8, "n_head": 2, "pattern": Causal(), "rng": 0, "positions": positions()}
        yield f"MultiHeadAttention({kind}).forward", _module_forward(MultiHeadAttention, kw, "x",
                                                                     lambda: (f32(2, 3, 8),))
        yield f"MultiHeadAttention({kind}).backward(near miss)", near_miss_backward(
            lambda kw=kw: MultiHeadAttention(**kw), lambda: (f32(2, 3, 8),))
    grid = {"grid_height": 2, "grid_width": 3, "d_model": 4, "rng": 0}
    yield "GridPositionEmbedding()", entrance(GridPositionEmbedding, lambda: dict(grid))
    yield "GridPositionEmbedding.backward", _module_backward(GridPositionEmbedding, grid, lambda: ())
    yield "SinkKVCache()", entrance(sink_cache.SinkKVCache, lambda: {"n_sink": 1, "window": 2})
    yield "SinkKVCache.append", entrance(lambda k_new, v_new: sink_cache.SinkKVCache(1, 2).append(k_new, v_new),
                                         lambda: {"k_new": f32(1, 2, 1, 4), "v_new": f32(1, 2, 1, 4)})


# ------------------------------------------------------------------ models, configs, presets
TINY = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)
CLASSIFIER = dict(n_layer=1, n_head=2, d_model=8)


def _config_fields(cls, good, fields, extra=()):
    """cls(**good, field=junk) for each field: a named refusal."""
    for field in fields:
        yield f"{cls.__name__}({field})", _one_field(cls, good, field, extra)


def _one_field(cls, good, field, extra):
    def run(d):
        value = d.draw(st.one_of(junk, st.sampled_from([None, 0, -1, -0.5, 0.0, float("nan"), float("inf"),
                                                        "2", True, 2.5, 10 ** 12])))
        refuses(lambda: cls(**{**good, field: value}), [field, *extra])
    return run


def _model_entrances():
    from minitransformer.layers import set_recompute
    from minitransformer.models import GPT, TabularTransformer, ViT
    from minitransformer.models.classifier_config import TabularConfig, ViTConfig
    from minitransformer.models.config import EncoderConfig, GPTConfig
    from minitransformer.models.presets import count_parameters, preset
    from minitransformer.training.loop import TrainConfig
    yield from _config_fields(GPTConfig, {**TINY, "position": "shaw"}, ["relative_clip"])
    yield from _config_fields(GPTConfig, {**TINY, "position": "t5"}, ["relative_buckets", "relative_max_distance"],
                              extra=["relative_max_distance"])       # more buckets need a longer max distance
    yield from _config_fields(GPTConfig, {**TINY, "window": 4}, ["dilation", "global_positions"])
    yield from _config_fields(GPTConfig, {**TINY, "position": "rope"}, ["attn_p_drop", "rope_scale"])
    yield from _config_fields(EncoderConfig, TINY, ["pooler"])
    yield from _config_fields(ViTConfig, {**CLASSIFIER, "image_size": 4, "patch_size": 2},
                              ["image_size", "patch_size", "in_channels", "n_classes"], extra=["image_size"])
    yield from _config_fields(TabularConfig, CLASSIFIER, ["n_numeric", "cardinalities", "n_classes"])
    yield from _config_fields(ViTConfig, {**CLASSIFIER, "image_size": 4, "patch_size": 2},
                              ["d_ff", "norm", "norm_position", "eps", "activation", "p_drop", "bias", "init_std",
                               "n_layer", "n_head", "d_model"], extra=["d_model", "n_head"])
    yield from _config_fields(TrainConfig, {}, ["recompute"])
    vit_cfg = ViTConfig(**CLASSIFIER, image_size=4, patch_size=2)
    tab_cfg = TabularConfig(**CLASSIFIER, n_numeric=2, cardinalities=(3, 2))
    yield "ViT()", entrance(ViT, lambda: {"config": vit_cfg, "rng": 0, "dtype": np.float32})
    yield "TabularTransformer()", entrance(TabularTransformer, lambda: {"config": tab_cfg, "rng": 0,
                                                                        "dtype": np.float32})
    yield "ViT.forward", _module_forward(lambda: ViT(vit_cfg), {}, "images", lambda: (f32(2, 4, 4, 1),))
    yield "ViT.backward", _module_backward(lambda: ViT(vit_cfg), {}, lambda: (f32(2, 4, 4, 1),))
    tab_in = lambda: (f32(2, 2), np.array([[0, 1], [2, 0]]))               # noqa: E731
    yield "TabularTransformer.forward", _module_forward(lambda: TabularTransformer(tab_cfg), {}, "x_num", tab_in,
                                                        names=["x_num", "x_cat"])
    yield "TabularTransformer.backward", _module_backward(lambda: TabularTransformer(tab_cfg), {}, tab_in)
    yield "ViT.forward(near miss)", near_miss_entrance(lambda images: ViT(vit_cfg).forward(images),
                                                       lambda: {"images": f32(2, 4, 4, 1)}, ["images"])
    yield "ViT.backward(near miss)", near_miss_backward(lambda: ViT(vit_cfg), lambda: (f32(2, 4, 4, 1),))
    yield "TabularTransformer.forward(near miss)", near_miss_entrance(
        lambda x_num, x_cat: TabularTransformer(tab_cfg).forward(x_num, x_cat),
        lambda: {"x_num": f32(2, 2), "x_cat": np.array([[0, 1], [2, 0]])}, ["x_num", "x_cat"])
    yield "TabularTransformer.backward(near miss)", near_miss_backward(lambda: TabularTransformer(tab_cfg), tab_in)
    for extra_cfg in ({"position": "shaw", "relative_clip": 2}, {"position": "t5", "relative_buckets": 8,
                                                                 "relative_max_distance": 16},
                      {"window": 2, "dilation": 2}, {"window": 2, "global_positions": [0]},
                      {"position": "rope", "rope_scale": 2.0, "attn_p_drop": 0.1}):
        label = ",".join(f"{k}={v}" for k, v in extra_cfg.items())
        model = GPT(GPTConfig(**TINY, **extra_cfg), dropout_rng=0)
        yield f"GPT({label}).forward", entrance(lambda ids, model=model: model.forward(ids),
                                                lambda: {"ids": ids(2, 3, high=11)})
        yield f"GPT({label}).forward(near miss)", near_miss_entrance(lambda ids, model=model: model.forward(ids),
                                                                     lambda: {"ids": ids(2, 8, high=11)}, ["ids"])
        yield f"GPT({label}).backward(near miss)", near_miss_backward(
            lambda extra_cfg=extra_cfg: GPT(GPTConfig(**TINY, **extra_cfg), dropout_rng=0),
            lambda: (ids(2, 3, high=11),))
    from minitransformer.models import Encoder
    enc = Encoder(EncoderConfig(**TINY, pooler=True))
    yield "Encoder(pooler).forward", entrance(lambda ids: enc.forward(ids), lambda: {"ids": ids(2, 3, high=11)})
    yield "preset", entrance(preset, lambda: {"name": "bert-base"})
    yield "preset(overrides)", entrance(lambda n_layer, d_model: preset("transformer-base", n_layer=n_layer,
                                                                        d_model=d_model),
                                        lambda: {"n_layer": 2, "d_model": 512})
    yield "count_parameters", entrance(count_parameters, lambda: {"config": GPTConfig(**TINY)})
    yield "set_recompute", entrance(set_recompute, lambda: {"model": GPT(GPTConfig(**TINY)), "on": True})


# ------------------------------------------------------------------ generation, training helpers
def _generation_entrances():
    from minitransformer.generation import generate
    from minitransformer.generation.streaming import streaming_nll
    from minitransformer.models import GPT
    from minitransformer.models.config import GPTConfig
    gpt = GPT(GPTConfig(**TINY, position="rope"))
    yield "generate(cache_window, n_sink)", entrance(
        lambda prompt_ids, cache_window, n_sink: generate(gpt, prompt_ids, 3, cache_window=cache_window,
                                                          n_sink=n_sink),
        lambda: {"prompt_ids": ids(1, 2), "cache_window": 4, "n_sink": 1})
    others = [GPT(GPTConfig(**TINY)), GPT(GPTConfig(**TINY, position="shaw")),
              GPT(GPTConfig(**TINY, position="t5")), GPT(GPTConfig(**TINY, position="sinusoidal"))]

    def streaming_models(d):
        model = d.draw(st.sampled_from(others))
        refuses(lambda: streaming_nll(model, ids(1, 5), 3, 1), ["model", "position"])
        refuses(lambda: generate(model, ids(1, 2), 3, cache_window=4, n_sink=1), ["model", "position", "cache_window"])
    yield "streaming_nll / generate(cache_window) with positions that cannot stream", streaming_models
    yield "generate(cache_window, strategy)", entrance(
        lambda cache_window, n_sink, use_cache, strategy: generate(gpt, ids(1, 2), 3, strategy=strategy,
                                                                    cache_window=cache_window, n_sink=n_sink,
                                                                    use_cache=use_cache),
        lambda: {"cache_window": 4, "n_sink": 0, "use_cache": True, "strategy": "beam"})
    yield "streaming_nll", entrance(streaming_nll, lambda: {"model": gpt, "ids": ids(1, 5), "window": 3,
                                                            "n_sink": 1})


def _training_entrances():
    from minitransformer.training import classification, context, shapes, tables
    from minitransformer.models import GPT
    from minitransformer.models.config import GPTConfig
    g = lambda: np.random.default_rng(0)                                   # noqa: E731
    yield "draw_shapes", entrance(shapes.draw_shapes, lambda: {"n": 2, "rng": g(), "size": 8, "noise": 0.1})
    yield "make_table", entrance(tables.make_table, lambda: {"n": 2, "rng": g(), "flip": 0.05})
    yield "ClassificationTask()", entrance(classification.ClassificationTask, lambda: {
        "make": tables.make_table, "batch_size": 2, "n_val": 4, "seed": 0, "tokens_per_example": 1})
    yield "vit_task", entrance(classification.vit_task, lambda: {"batch_size": 2, "seed": 0, "image_size": 8,
                                                                 "patch_size": 4, "n_val": 4, "n_layer": 1,
                                                                 "d_model": 8, "n_head": 2})
    yield "tabular_task", entrance(classification.tabular_task, lambda: {"batch_size": 2, "seed": 0, "n_val": 4,
                                                                         "n_layer": 1, "d_model": 8, "n_head": 2})
    model, task, _ = classification.tabular_task(batch_size=2, n_val=4, n_layer=1, d_model=8, n_head=2)
    yield "classification_accuracy", entrance(classification.classification_accuracy, lambda: {
        "model": model, "task": task, "batch_size": 2, "device": "cpu"})
    yield "train_char_gpt", entrance(context.train_char_gpt, lambda: {"steps": 1, "seed": 0, "batch_size": 2,
                                                                      "lr": 1e-3, "text": "abcab" * 40,
                                                                      "n_layer": 1, "d_model": 8, "n_head": 2,
                                                                      "block_size": 4})
    gpt = GPT(GPTConfig(**TINY, position="rope"))
    yield "position_losses", entrance(context.position_losses, lambda: {"model": gpt, "ids": ids(40, high=11),
                                                                        "length": 6, "n_windows": 2,
                                                                        "rope_scale": 1.0})


# ------------------------------------------------------------------ the CLI's flags for them
def _cli_new_flags(d):
    base = ["--steps", "1", "--batch-size", "2", "--out", os.path.join(_tmp(), "cli_new")]
    small = ["--n-layer", "1", "--d-model", "8", "--n-head", "2"]
    bad = d.draw(st.sampled_from(["abc", "", "nan", "inf", "-1", "1e999", "0x10"]))
    case = d.draw(st.sampled_from(["vit", "tabular", "shaw", "t5", "recompute", "generate"]))
    if case in ("vit", "tabular"):
        flag = d.draw(st.sampled_from(["--d-model", "--n-layer", "--n-head", "--lr", "--batch-size", "--steps"]))
        argv = ["train", "--model", case, *base, *small, flag, bad]
    elif case in ("shaw", "t5"):
        flag = d.draw(st.sampled_from(_train_flags(case)))
        argv = ["train", "--position", case, *base, *small, "--block-size", "8", flag, bad]
    elif case == "recompute":
        flag = "--recompute"
        argv = ["train", *base, *small, "--block-size", "8", "--recompute", bad]
    else:
        from test_entrances_pairs_modules_cli import _cli_checkpoint
        flag = d.draw(st.sampled_from(_generate_flags()))
        argv = ["generate", "--checkpoint", _cli_checkpoint(), "--prompt", "ab", "--max-new-tokens", "2", flag, bad]
    code, _, err = run_cli(argv)
    assert_one_line_error(argv, code, err, None if case == "recompute" else flag)


def _cli_text_flags_for_classifiers(d):
    """vit and tabular train on generated data: a text flag (or --task, --position) is refused by name."""
    model = d.draw(st.sampled_from(["vit", "tabular"]))
    flag, value = d.draw(st.sampled_from([("--data", os.path.join(_tmp(), "no_such.txt")), ("--tokenizer", "bpe"),
                                          ("--vocab-size", "300"), ("--block-size", "8"), ("--task", "lm"),
                                          ("--position", "rope")]))
    argv = ["train", "--model", model, "--steps", "1", "--out", os.path.join(_tmp(), "cli_cls"), flag, value]
    code, _, err = run_cli(argv)
    assert_one_line_error(argv, code, err, flag)


def _flags(command):
    from minitransformer import cli
    sub = next(a for a in cli._parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(a.option_strings[-1] for a in sub.choices[command]._actions if a.option_strings
                  and a.type is not None and a.type is not str)


def _train_flags(position):
    return _flags("train")


def _generate_flags():
    return [f for f in _flags("generate") if f not in ("--seed",)]


def _cli_figures(d):
    case = d.draw(st.sampled_from(["unwritable", "file", "update"]))
    if case == "unwritable":
        argv = ["figures", "--only", "interpolation", "--out", "/proc/forbidden_figs"]
    elif case == "file":
        argv = ["figures", "--only", "interpolation", "--out", "/dev/null/figs"]
    else:
        argv = ["figures", "--only", "interpolation", "--update-repo-figures", "--out", os.path.join(_tmp(), "f")]
    code, _, err = run_cli(argv)
    assert_one_line_error(argv, code, err, "--out")


ENTRANCES = {}
for _name, _run in [*_functional(), *_module_entrances(), *_model_entrances(), *_generation_entrances(),
                    *_training_entrances()]:
    ENTRANCES[_name] = _run
ENTRANCES["cli train vit|tabular|shaw|t5|recompute, generate (bad flags)"] = _cli_new_flags
ENTRANCES["cli train vit|tabular with a text flag"] = _cli_text_flags_for_classifiers
ENTRANCES["cli figures --out unwritable, --update-repo-figures with --out"] = _cli_figures


@pytest.mark.parametrize("name", sorted(ENTRANCES))
@settings(FAST, max_examples=int(os.environ.get("FUZZ_EXAMPLES", FAST.max_examples)))   # FUZZ_EXAMPLES=300: a longer hunt
@given(data=st.data())
def test_near_miss_entrance_refuses_with_a_named_error(name, data):
    run_in_scratch_dir(ENTRANCES[name], data)


def test_near_miss_entrance_count():
    from test_entrances_models_and_files import ENTRANCES as FIRST
    from test_entrances_pairs_modules_cli import ENTRANCES as MORE
    assert len(ENTRANCES) >= 133
    assert not set(ENTRANCES) & (set(FIRST) | set(MORE))
    print(f"fuzzed entrances: {len(ENTRANCES)} here + {len(MORE)} + {len(FIRST)}")
