"""KV-cache bytes and FLOPs per token of the presets, against arithmetic written out here from
the published architectures; the notable-models table; the costs figure."""
from pathlib import Path

import numpy as np
import pytest

from minitransformer.models.costs import flops_per_token, kv_cache_bytes, matmul_parameters
from minitransformer.models.presets import (NOTABLE_COLUMNS, PRESETS, count_parameters, notable_models,
                                            notable_models_markdown, preset)
from minitransformer.plots.costs import costs_figure

DOCS = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def test_kv_cache_of_llama_2_70b_shows_the_gqa_saving():
    # LLaMA-2-70B (Touvron et al. 2023, Table 1 and section 2.2): 80 layers, 8 kv heads of 128 numbers,
    # K and V, float16 (2 bytes)
    gqa = preset("llama-2-70b")
    assert kv_cache_bytes(gqa) == 2 * 80 * 8 * 128 * 2 == 327_680
    as_mha = preset("llama-2-70b", n_kv_head=None)                    # 64 kv heads
    assert kv_cache_bytes(as_mha) == 2 * 80 * 64 * 128 * 2
    assert kv_cache_bytes(as_mha) == 8 * kv_cache_bytes(gqa)         # H / G = 64 / 8
    # a full 4096-token context: 1.25 GiB with GQA, 10 GiB without
    assert kv_cache_bytes(gqa, tokens=4096) == 1.25 * 2 ** 30
    assert kv_cache_bytes(as_mha, tokens=4096, batch=2) == 20 * 2 ** 30


def test_kv_cache_of_llama_2_7b_and_gpt2_in_float32():
    # LLaMA-2-7B: 32 layers × 32 heads × 128: the often quoted 0.5 MiB a token in float16
    assert kv_cache_bytes(preset("llama-2-7b")) == 2 * 32 * 32 * 128 * 2 == 2 ** 19
    assert kv_cache_bytes(preset("gpt2-small"), tokens=1024, bytes_per_number=4) == 2 * 12 * 768 * 4 * 1024


def test_flops_per_token_are_2n_plus_the_attention_term_and_three_times_that_in_training():
    # GPT-2 small: 124,439,808 parameters, of which the 1024 × 768 learned positions are a lookup
    # (the tied 50257 × 768 matrix multiplies, as the output layer)
    N = 124_439_808 - 1024 * 768
    gpt2 = preset("gpt2-small")
    assert matmul_parameters(gpt2) == N
    assert flops_per_token(gpt2, 0) == 2 * N
    assert flops_per_token(gpt2, 1024) == 2 * N + 2 * 12 * 1024 * 768
    assert flops_per_token(gpt2, 1024, training=True) == 3 * (2 * N + 2 * 12 * 1024 * 768)
    # LLaMA-2-7B: untied, so the 32000 × 4096 input embedding is the lookup, and no positions
    llama = preset("llama-2-7b")
    assert matmul_parameters(llama) == 6_738_415_616 - 32000 * 4096
    assert flops_per_token(llama, 4096, training=True) == pytest.approx(6 * 6.6e9, rel=0.1)


def test_costs_refuse_what_they_do_not_model():
    with pytest.raises(TypeError, match="config: expected a GPTConfig"):
        kv_cache_bytes(preset("bert-base"))
    with pytest.raises(ValueError, match="tokens: expected an integer"):
        kv_cache_bytes(preset("gpt2-small"), tokens=-1)
    with pytest.raises(ValueError, match="bytes_per_number: expected a number"):
        kv_cache_bytes(preset("gpt2-small"), bytes_per_number=0)


def test_notable_models_table_lists_every_preset_and_the_docs_show_it():
    rows = notable_models()
    assert [r["model"] for r in rows] == list(PRESETS)
    assert all(tuple(r) == NOTABLE_COLUMNS for r in rows)
    llama = next(r for r in rows if r["model"] == "llama-2-70b")
    assert (llama["layers"], llama["heads"], llama["kv heads"], llama["d_ff"]) == (80, 64, 8, 28672)
    assert all(r["parameters"] == count_parameters(preset(r["model"])) for r in rows)
    table = notable_models_markdown()
    assert "| gpt2-small | decoder | 12 | 768 | 12 | 12 | 3,072 | 50,257 | 1,024 |" in table
    assert "124,439,808" in table and "6,738,415,616" in table
    assert table in DOCS.read_text(encoding="utf-8"), "docs/models.md: paste notable_models_markdown() again"


def test_costs_figure_grows_linearly_and_attention_share_rises(tmp_path):
    _, data = costs_figure(contexts=(512, 1024, 4096), path=tmp_path / "costs.png")
    gqa, mha = data["kv_gib"]["LLaMA-2-70B, GQA (8 kv heads)"], data["kv_gib"]["LLaMA-2-70B if MHA (64 kv heads)"]
    np.testing.assert_allclose(mha, 8 * gqa)
    np.testing.assert_allclose(gqa, [0.15625, 0.3125, 1.25])          # 327,680 B · T / 2^30
    for share in data["attention_share"].values():
        assert np.all(np.diff(share) > 0) and np.all((0 < share) & (share < 1))
    assert (tmp_path / "costs.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="contexts: expected sequence lengths >= 1"):
        costs_figure(contexts=(0,))
