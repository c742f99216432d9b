"""BigBird-Pegasus (model/families_bigbird.py, ops/bigbird.py): an encoder-decoder whose encoder runs BigBird's
block-sparse attention, proven against transformers 5.23.

Parameters by component: BigBirdPegasusConfig's defaults on the meta device. FLOPs and cache bytes: the meta
device cannot run this model's forward (``Tensor.item()`` while building its masks), so a small model built on
the CPU runs the three stages as ``generate`` does (``oracle.seq2seq_flops`` on the model's device), counted by
``FlopCounterMode``: blocks of 4 positions and 1 random block, so block-sparse attention runs above
(5 + 2·1)·4 = 28 source tokens and a 29-token source is padded to 32. transformers switches an encoder that
fell back to full attention for good (``set_attention_type``), so each source length gets a fresh model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import decoder_alone_costs, hf_groups, llmath_groups, matmul_flops, run_cli, saved_config

from llmath import Workload
from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario, build_ops
from llmath.ops.bigbird_sizes import encoder_rows, score_entries
from llmath.ops.params import param_report

B, T = 2, 3  # batch, decoder prefill tokens
SMALL = dict(
    vocab_size=50, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
    decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=1100, block_size=4,
    num_random_blocks=1,
)  # fmt: skip


def _config(tmp_path, **kw) -> dict:
    transformers = pytest.importorskip("transformers")
    return saved_config(transformers.BigBirdPegasusConfig(**kw), tmp_path / "config.json")


def test_params_by_component_equal_transformers_on_meta(tmp_path):
    pytest.importorskip("torch")
    from llmath.measure import oracle

    cfg = _config(tmp_path)  # the defaults: 16 + 16 layers of width 1024, block_sparse, blocks of 64
    spec = spec_from_config(cfg, "bigbird_pegasus")
    model = oracle.build_meta(oracle.hf_config(cfg))
    assert param_report(spec).total == oracle.count_params(model)
    assert llmath_groups(param_report(spec)) == hf_groups(model)  # named_parameters: the tied head once
    assert (spec.encoder.block_size, spec.encoder.random_blocks) == (64, 3)


@pytest.mark.parametrize(
    "attention_type, src",
    [
        ("block_sparse", 29),  # block-sparse, padded to 32 (8 blocks)
        ("block_sparse", 40),  # block-sparse, no padding (10 blocks)
        ("block_sparse", 28),  # at the threshold (5 + 2·1)·4: transformers falls back to full attention
        ("block_sparse", 1024),  # one of the lengths with the paper's fixed random plans
        ("original_full", 29),
    ],
)
def test_stage_flops_and_cache_equal_transformers_on_cpu(attention_type, src, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from llmath.measure import oracle

    cfg = _config(tmp_path, attention_type=attention_type, **SMALL)
    spec = spec_from_config(cfg, "small")
    torch.manual_seed(0)
    model = transformers.AutoModelForSeq2SeqLM.from_config(oracle.hf_config(cfg), attn_implementation="eager").eval()
    assert llmath_groups(param_report(spec)) == hf_groups(model)
    hf = oracle.seq2seq_flops(model, B, src, T)  # on the model's device, the CPU
    assert matmul_flops(spec, "encoder", Scenario(B, src)) == hf["encoder"]
    # seq2seq heads compute logits at every decoder position; the decoder cross-attends the src unpadded rows
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=src)) == hf["prefill"]
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=src)) == hf["decode"]
    assert (kv_cache_bytes(spec, B, T, Precision()), kv_cache_bytes(spec, B, 0, Precision(), src=src)) == hf[
        "cache_bytes"
    ]


def test_block_sparse_sizes_by_hand():
    # b = 4, r = 1: full attention up to (5 + 2)·4 = 28 tokens
    assert (encoder_rows(28, 4, 1), score_entries(28, 4, 1)) == (28, 28 * 28)
    # 29 tokens pad to 32 = 8 blocks: first and last blocks 2·4·32 = 256; second and second-to-last
    # 2·(4 + 1)·16 = 160; 8 − 4 = 4 middle blocks of (3 sliding + 1 random + 2 global)·16 = 96 each, 384
    assert (encoder_rows(29, 4, 1), score_entries(29, 4, 1)) == (32, 256 + 160 + 384)
    # the defaults (b = 64, r = 3) at 4096 tokens: 64 blocks; 2·64·4096 + 2·7·64² + 60·8·64²
    assert score_entries(4096, 64, 3) == 524_288 + 57_344 + 1_966_080
    # a sweep's arrays take the same branches
    assert list(score_entries(np.array([28, 29]), 4, 1)) == [784, 800]
    assert list(encoder_rows(np.array([28, 29]), 4, 1)) == [28, 32]


def test_flash_runs_the_same_block_pairs(tmp_path):
    cfg = _config(tmp_path, **SMALL)
    spec = spec_from_config(cfg, "small")
    # flash fuses the block pairs eager computes: the scores + context FLOPs of eager, 4·N·H per entry
    sc = Scenario(B, 29)
    flash = {op.name: op for op in build_ops(spec, "encoder", "flash")}["encoder.self_attn.flash"]
    assert flash.terms("flops")[0].mono == "bE:4:1"
    from helpers import values_by_op

    eager = values_by_op(spec, "encoder", "eager", sc)
    fl = values_by_op(spec, "encoder", "flash", sc)
    prods = eager["encoder.self_attn.scores"]["flops"] + eager["encoder.self_attn.context"]["flops"]
    # 2 layers · B = 2 · 2 products · 2·N·H = 2·2·8 per entry · 800 entries (test_block_sparse_sizes_by_hand)
    assert fl["encoder.self_attn.flash"]["flops"] == prods == 2 * 2 * 2 * (2 * 2 * 8) * 800


def test_eager_writes_the_dense_probabilities_transformers_returns(tmp_path):
    spec = spec_from_config(_config(tmp_path, **SMALL), "small")
    # BigBirdPegasusBlockSparseAttention (5.23) fills a zeros (B, N, Tp, Tp) attention_probs per layer:
    # 2 layers · B = 2 · N = 2 · 32² for a 29-token source padded to 32; none at the 28-token fallback
    # (whose T × T scores are the probabilities) and none under flash
    from helpers import values_by_op

    eager = values_by_op(spec, "encoder", "eager", Scenario(B, 29))
    assert eager["encoder.self_attn.dense_probs"]["act_out"] == 2 * 2 * 2 * 32 * 32
    assert (
        values_by_op(spec, "encoder", "eager", Scenario(B, 28))["encoder.self_attn.dense_probs"].get("act_out", 0) == 0
    )
    assert "encoder.self_attn.dense_probs" not in values_by_op(spec, "encoder", "flash", Scenario(B, 29))


def test_analyze_runs_stage_by_stage(tmp_path, capsys):
    import llmath

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config(tmp_path)))
    a = llmath.analyze(str(path), "h100-sxm", workload=Workload(batch=1, prompt=4096, gen=32))
    spec = spec_from_config(json.loads(path.read_text()), "x")
    assert a.generation["ttft_s"] > a.generation["encoder_s"] > 0
    d = a.to_dict(with_ops=False)
    assert d["encoder"]["flops"]["matmul"] == matmul_flops(spec, "encoder", Scenario(1, 4096), "flash")
    # bf16 cross cache: K and V of 16 decoder layers × 1024 wide per source position, 4096 positions
    assert d["kv_cache"]["cross_bytes"] == 4096 * 2 * 16 * 1024 * 2
    code, out, err = run_cli(capsys, "analyze", str(path), "--prompt", "4096", "--gen", "32", "--json")
    assert code == 0 and json.loads(out)["encoder"]["flops"]["matmul"] == d["encoder"]["flops"]["matmul"]
    code, out, err = run_cli(capsys, "analyze", str(path), "--prompt", "4096", "--gen", "32")
    assert code == 0 and "encoder" in out.lower()


def test_block_sparse_encoder_beats_full_attention_at_length(tmp_path):
    sparse = spec_from_config(_config(tmp_path), "s")
    full = spec_from_config(_config(tmp_path, attention_type="original_full"), "f")
    sc = Scenario(1, 4096)
    # the attention products differ; everything else (4096 rows, no padding) is the same
    diff = matmul_flops(full, "encoder", sc) - matmul_flops(sparse, "encoder", sc)
    # 16 layers · 2 products · 2·N·H = 2·1024 per entry · (4096² − block-sparse entries)
    assert diff == 16 * 2 * 2 * 1024 * (4096 * 4096 - score_entries(4096, 64, 3))


@pytest.mark.parametrize(
    "extra, match",
    [
        (dict(attention_type="sparse"), "attention_type='sparse'"),
        (dict(block_size=0), "block_size=0"),
        (dict(num_random_blocks=0), "num_random_blocks=0"),  # transformers' block-sparse path fails on it
    ],
)
def test_unmodelled_inputs_are_refused(extra, match, tmp_path):
    cfg = dict(_config(tmp_path), **extra)
    with pytest.raises(ConfigError, match=match):
        spec_from_config(cfg, "bigbird_pegasus")


def test_causal_lm_reads_as_the_decoder_of_another_encoder(tmp_path):
    """BigBirdPegasusForCausalLM (the type's entry in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES; tests/causal_lm_types.py
    classes the type as encoder_decoder) is the decoder alone, read as TrOCR's: its own token table, untied LM
    head (5.23 declares no ``_tied_weights_keys``), layers with cross-attention over another encoder's ``src``
    outputs. On meta, given ``encoder_hidden_states`` (as an EncoderDecoderModel runs it): parameters by
    component, a T = 3 prefill (logits at every position) and one decode step, and its cache bytes."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from causal_lm_types import causal_lm_types

    from llmath.measure import oracle

    assert causal_lm_types()["bigbird_pegasus"] == "encoder_decoder"
    cfg = dict(_config(tmp_path, encoder_layers=2, decoder_layers=2), architectures=["BigBirdPegasusForCausalLM"])
    spec = spec_from_config(cfg, "bigbird_pegasus")
    with torch.device("meta"):
        model = transformers.BigBirdPegasusForCausalLM(oracle.hf_config(cfg))
    assert llmath_groups(param_report(spec)) == hf_groups(model)
    assert param_report(spec).by_component["lm_head.weight"] == 96103 * 1024  # a head of its own
    src = 11
    enc = torch.zeros(B, src, 1024, device="meta")
    ids = torch.zeros(B, T, dtype=torch.long, device="meta")

    hf_prefill, hf_decode, hf_cache = decoder_alone_costs(model, enc, ids)
    assert matmul_flops(spec, "prefill", Scenario(B, T, 0, logits="all", src=src)) == hf_prefill
    assert matmul_flops(spec, "decode", Scenario(B, 1, T, src=src)) == hf_decode
    assert kv_cache_bytes(spec, B, T, Precision(), src=src) == hf_cache
    assert build_ops(spec, "encoder", "eager") == ()  # the encoder is another model


def test_sweep_agrees_with_analyze_across_the_full_attention_threshold(tmp_path):
    import llmath
    from llmath.sweep import grid

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config(tmp_path)))
    # defaults: b = 64, r = 3, full attention up to (5 + 6)·64 = 704 tokens; 705 pads to 768
    prompts = np.array([704, 705, 4000])
    g = grid(str(path), "h100-sxm", np.array([2, 2, 2]), prompts, np.array([8, 8, 8]))
    for i, p in enumerate(prompts):
        a = llmath.analyze(str(path), "h100-sxm", workload=Workload(batch=2, prompt=int(p), gen=8))
        assert g["ttft_s"][i] == pytest.approx(a.generation["ttft_s"], rel=1e-9)
        assert g["e2e_s"][i] == pytest.approx(a.generation["e2e_s"], rel=1e-9)


def test_cli_refusal_is_one_line(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(dict(_config(tmp_path), attention_type="sparse")))
    code, out, err = run_cli(capsys, "analyze", str(path))
    assert code == 1 and "attention_type='sparse'" in err and len(err.strip().splitlines()) == 1
