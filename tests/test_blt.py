"""The Byte Latent Transformer (``blt``) against transformers 5.23 (``modeling_blt.py``).

Parameters are proven on the meta device from the config class's defaults (tests/test_oracle_causal_lm.py
too). The FLOPs run on small CPU models: the meta device cannot run BLT's forward (its mask checks the
position ids' values with ``.item()``), and its patches come from the entropy model's data. transformers 5.23
cannot run BLT with a cache at all (``DynamicCache(config=BltConfig)`` raises), so a decode step is the
forward over every byte again (as ``use_cache=False`` generation runs it) and BLT holds no cache: llmath
models it so (ops/blt.py) and the tests below prove each part.
"""

from __future__ import annotations

import functools
import json

import pytest
from causal_lm_types import default_config
from helpers import hf_groups, llmath_groups, matmul_flops, run_cli

from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario
from llmath.ops.params import param_report

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath.measure import oracle  # noqa: E402

# small stacks of different widths: cross-attention after every encoder layer and before the first decoder
# layer only; a global width (48) other than encoder width × cross_attn_k (64), so the global input projects
TINY = dict(
    vocab_size=260,
    cross_attn_k=2,
    encoder_hash_byte_group_vocab=50,
    patch_size=4,
    encoder_config=dict(
        hidden_size=32, num_attention_heads=2, num_hidden_layers=2, cross_attn_all_layers=True, intermediate_size=40
    ),
    global_config=dict(
        hidden_size=48, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, intermediate_size=56
    ),
    decoder_config=dict(
        hidden_size=32,
        num_attention_heads=2,
        num_hidden_layers=3,
        cross_attn_all_layers=False,
        intermediate_size=40,
        hidden_size_global=48,
    ),
    patcher_config=dict(hidden_size=24, num_attention_heads=2, num_hidden_layers=1, intermediate_size=32),
)
B = 2


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """These models are tiny: one thread runs them in milliseconds, where a shared 2-core runner's contended
    threads take seconds."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _cpu_model(**extra):
    """(config.json mapping, BltForCausalLM on the CPU, eager attention), built once per set of options."""
    return _built(tuple(sorted(extra.items())))


@functools.lru_cache(maxsize=4)
def _built(extra: tuple):
    from transformers import BltConfig, BltForCausalLM

    cfg = BltConfig(**dict(TINY, **dict(extra)))
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return json.loads(cfg.to_json_string(use_diff=False)), BltForCausalLM(cfg).eval()


def _counted(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _hf_pass(model, ids, lengths=None) -> int:
    """Matmul FLOPs of one forward without a cache, logits for the last byte: the entropy model over the bytes
    (``BltPatcher``, as ``BltModel.forward`` runs it when no patch lengths are given) + the rest given the
    patch ``lengths``; with ``lengths`` None the model's own forward, which runs its patcher itself."""
    whole = _counted(lambda: model(input_ids=ids, patch_lengths=lengths, use_cache=False, logits_to_keep=1))
    return whole if lengths is None else whole + _counted(lambda: model.model.patcher(ids, patch_size=None))


def test_parameters_without_the_entropy_model_on_meta(tmp_path):
    """The defaults (patcher included, as its own component) are proven in tests/test_oracle_causal_lm.py;
    with patch_in_forward false BltModel builds no patcher."""
    cfg = default_config("blt", str(tmp_path))
    rep = param_report(spec_from_config(cfg, "blt"))
    # a byte reads one row of each of the 6 hash tables (6·500002 rows) and one of the 260 byte rows, 1024 wide
    assert rep.total - rep.active_per_token == (6 * 500002 - 6) * 1024 + (260 - 1) * 1024
    cfg = dict(cfg, patch_in_forward=False)
    assert param_report(spec_from_config(cfg, "blt"), "eager").total == oracle.count_params(
        oracle.build_meta(oracle.hf_config(cfg))
    )


def test_small_model_parameters_and_components():
    cfg, model = _cpu_model()
    rep = param_report(spec_from_config(cfg, "blt"), "eager")
    assert rep.total == sum(p.numel() for p in model.parameters())
    assert llmath_groups(rep) == hf_groups(model)
    # the three patch projections: 32·(32·2) in the encoder, 64·48 into the global stack, 48·(32·2) in the decoder
    assert rep.by_component["projection.encoder.patch.weight"] == 32 * 64
    assert llmath_groups(rep)["projection"] == 32 * 64 + 64 * 48 + 48 * 64


@pytest.mark.parametrize("lengths", [[4, 4, 4], [1, 6, 5], [2, 2, 8]])
def test_prefill_flops_are_a_function_of_the_patch_count(lengths):
    """L = 12 bytes in P = 3 patches of any lengths: the FLOPs depend on P only, and equal llmath's at
    bytes_per_patch = patch_size = 4 (P = 12 / 4)."""
    cfg, model = _cpu_model()
    spec = spec_from_config(cfg, "blt")
    ids = torch.randint(0, 260, (B, 12))
    hf = _hf_pass(model, ids, torch.tensor([lengths] * B))
    assert matmul_flops(spec, "prefill", Scenario(B, 12), "eager") == hf
    # flash computes every entry of BLT's masked rectangles too (ops/blt.py): the same matmul FLOPs
    assert matmul_flops(spec, "prefill", Scenario(B, 12), "flash") == hf


def test_entropy_patching_in_the_forward():
    """The model's own forward (patcher included, no lengths given) with a threshold no entropy exceeds: the
    patcher keeps only its two fixed starts (bytes 0 and 1), so P = 2 = 12 / 6 at patch_size = 6."""
    cfg, model = _cpu_model(patch_size=6, patching_threshold=1e9)
    ids = torch.randint(0, 260, (B, 12))
    assert matmul_flops(spec_from_config(cfg, "blt"), "prefill", Scenario(B, 12), "eager") == _hf_pass(model, ids)


def test_decode_step_reruns_every_byte_without_a_cache():
    cfg, model = _cpu_model()
    ids = torch.randint(0, 260, (B, 8))
    with pytest.raises(AttributeError, match="num_hidden_layers"):  # DynamicCache(config=BltConfig) in 5.23
        model(input_ids=ids, use_cache=True)
    assert model(input_ids=ids, use_cache=False).past_key_values is None
    spec = spec_from_config(cfg, "blt")
    # the decode step at context S = 11: one new byte, the forward over all 12 in 3 patches
    hf = _hf_pass(model, torch.randint(0, 260, (B, 12)), torch.full((B, 3), 4))
    assert matmul_flops(spec, "decode", Scenario(B, 1, 11), "eager") == hf
    assert matmul_flops(spec, "prefill", Scenario(B, 4, 8), "eager") == hf  # a prefill after 8 bytes: the same
    assert kv_cache_bytes(spec, B, 12, Precision()) == 0


def test_analyze_cli_on_a_blt_config(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(default_config("blt", str(tmp_path))))
    code, out, err = run_cli(capsys, "analyze", str(path), "-H", "h100-sxm", "--prompt", "256", "--gen", "4")
    assert code == 0, err
    assert "4,633,127,680" in out
    code, out, err = run_cli(capsys, "analyze", str(path), "-H", "h100-sxm", "--prompt", "256", "--gen", "4", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["params"]["total"] == 4_633_127_680 and d["kv_cache"]["bytes"] == 0
    assert d["decode"]["flops"]["matmul"] > d["prefill"]["flops"]["matmul"] > 0  # the step reruns 257 bytes


def test_inconsistent_widths_are_refused(tmp_path):
    cfg = default_config("blt", str(tmp_path))
    bad = dict(cfg, decoder_config=dict(cfg["decoder_config"], cross_attn_k=3))
    with pytest.raises(ConfigError, match="cross_attn_k"):
        spec_from_config(bad, "blt")
    bad = dict(cfg, decoder_config=dict(cfg["decoder_config"], hidden_size=512))
    with pytest.raises(ConfigError, match="encoder hidden_size=1024 must equal decoder hidden_size=512"):
        spec_from_config(bad, "blt")


def test_layouts_and_continuous_batching_are_refused(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(default_config("blt", str(tmp_path))))
    common = (str(path), "-H", "h100-sxm", "--prompt", "256", "--gen", "4")
    code, _, err = run_cli(capsys, "analyze", *common, "--gpus", "2", "--tp", "2")
    assert code == 2 and "no sharding rule yet" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "analyze", *common, "--concurrency", "4")
    assert code == 2 and "keeps no cache" in err
    code, out, err = run_cli(capsys, "sweep", str(path), "-H", "h100-sxm", "--batch", "1:2:x2", "--prompt", "64",
                             "--gen", "2", "--json")  # fmt: skip
    assert code == 0, err
