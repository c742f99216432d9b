"""Gemma 4's assistants (``gemma4_assistant``, ``gemma4_unified_assistant``): draft models on the target's cache.

transformers 5.23 cannot build either from any config: ``Gemma4TextConfig.kv_sharing_modes`` (and the unified
text config's) raises "The set of layer types producing a cache is different than the set of layer types using
them" whenever ``num_kv_shared_layers == num_hidden_layers``, which both assistant config classes force. The
tests build them with that one property patched (:func:`_all_reuse`): every layer "reuse", none "store", which
is what the assistant classes state ("Assistant reuses the shared kvs across all layers") and what their
forward does (every attention takes K/V from ``shared_kv_states``). Everything else is transformers' own code.

``gemma4_assistant``'s config class cannot be built from its defaults either (its text_config default has
per-layer embeddings: 'hidden_size_per_layer_input must be 0, got 256'): :func:`e2b_assistant_config` writes a
realistic one instead, sourced there.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from causal_lm_types import default_config
from helpers import hf_groups, llmath_groups, matmul_flops, saved_config, values_by_op

from llmath.analysis import kv_cache_bytes
from llmath.errors import ConfigError
from llmath.model.dtypes import Precision
from llmath.model.hf import spec_from_config
from llmath.ops import Scenario
from llmath.ops.params import param_report

pytest.importorskip("torch")
pytest.importorskip("transformers")
from llmath import Workload
from llmath.measure import oracle  # noqa: E402


@contextlib.contextmanager
def _all_reuse():
    """transformers 5.23's kv_sharing_modes with every layer shared: all "reuse" (see the module docstring)."""
    from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
    from transformers.models.gemma4_unified.configuration_gemma4_unified import Gemma4UnifiedTextConfig

    saved = {c: c.__dict__["kv_sharing_modes"] for c in (Gemma4TextConfig, Gemma4UnifiedTextConfig)}

    def modes(orig):
        def get(self):
            n = self.num_hidden_layers
            return ["reuse"] * n if self.num_kv_shared_layers == n else orig.fget(self)

        return property(get)

    try:
        for c, orig in saved.items():
            c.kv_sharing_modes = modes(orig)
        yield
    finally:
        for c, orig in saved.items():
            c.kv_sharing_modes = orig


def e2b_assistant_config(tmp_path, **over) -> dict:
    """A gemma4_assistant config.json shaped as google/gemma-4-E2B-it-assistant where a source states it: 4
    layers, the ordered-embedding head with 2048 centroids and top-32 (2048 x 128 token ordering over the
    262144-token vocabulary), backbone width 1536 (= Gemma 4 E2B's hidden size), as the Go package
    dappco.re/go/inference gemma4 records them from that checkpoint's config.json (revision 5810c41a). Its
    text_config's other values are transformers' Gemma4TextConfig defaults, not the checkpoint's; per-layer
    embeddings off, as Gemma4AssistantConfig requires."""
    from transformers import Gemma4AssistantConfig, Gemma4TextConfig

    text = dict(num_hidden_layers=4, hidden_size_per_layer_input=0, vocab_size_per_layer_input=0)
    text.update(over.pop("text", {}))
    cfg = Gemma4AssistantConfig(
        text_config=Gemma4TextConfig(**text),
        **{"backbone_hidden_size": 1536, "use_ordered_embeddings": True, "num_centroids": 2048,
           "centroid_intermediate_top_k": 32, **over},
    )  # fmt: skip
    return saved_config(cfg, tmp_path / "assistant.json")


def _configs(tmp_path):
    return {
        "gemma4_assistant": e2b_assistant_config(tmp_path),
        "gemma4_unified_assistant": default_config("gemma4_unified_assistant", str(tmp_path)),
    }


@pytest.mark.parametrize("mt", ["gemma4_assistant", "gemma4_unified_assistant"])
def test_assistant_params_equal_transformers(mt, tmp_path):
    cfg = _configs(tmp_path)[mt]
    with _all_reuse():
        model = oracle.build_meta(oracle.hf_config(cfg))
    spec = spec_from_config(cfg, mt)
    rep = param_report(spec, "eager")
    assert rep.total == oracle.count_params(model)
    assert llmath_groups(rep) == hf_groups(model)
    assert spec.assistant is not None and all(spec.layer_kv_shared)
    # no cache of its own: every layer reads the target's
    assert kv_cache_bytes(spec, 1, 4096, Precision()) == 0


TYPES = ["sliding_attention", "full_attention"]
# the target's K/V shapes the assistant's queries must match: 1 K/V head of 16 (sliding) / 32 (full)
SHAPES = dict(num_key_value_heads=1, head_dim=16, global_head_dim=32, vocab_size=256, sliding_window=4)


def _tiny_pair(unified: bool, ordered: bool):
    """A 6-layer target (2 KV-shared layers, so its layers 2 and 3 store K/V for an assistant) of width 64 and
    a 2-layer assistant of width 48 over it, both eager, on CPU: the target must run for real to hand over its
    K/V (``return_shared_kv_states``), and the ordered head calls ``.item()``, which meta cannot."""
    import transformers as tf

    text_cls = tf.Gemma4UnifiedTextConfig if unified else tf.Gemma4TextConfig
    target_cls = tf.Gemma4UnifiedForCausalLM if unified else tf.Gemma4ForCausalLM
    asst_cls = tf.Gemma4UnifiedAssistantConfig if unified else tf.Gemma4AssistantConfig
    no_ple = {} if unified else dict(hidden_size_per_layer_input=0, vocab_size_per_layer_input=0)
    target = text_cls(hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_kv_shared_layers=2,
                      num_attention_heads=2, layer_types=TYPES * 3, **SHAPES, **no_ple)  # fmt: skip
    text = text_cls(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
                    layer_types=TYPES, **SHAPES, **no_ple)  # fmt: skip
    head = dict(use_ordered_embeddings=ordered, num_centroids=16, centroid_intermediate_top_k=4)
    cfg = asst_cls(text_config=text, backbone_hidden_size=64, **head)
    with _all_reuse():
        assistant = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    return target_cls._from_config(target, attn_implementation="eager").eval(), assistant, cfg


@pytest.mark.parametrize("unified", [False, True], ids=["gemma4_assistant", "gemma4_unified_assistant"])
@pytest.mark.parametrize("ordered", [False, True], ids=["lm_head", "ordered_embeddings"])
def test_draft_step_flops_and_kv_reads_equal_transformers(unified, ordered, tmp_path):
    """One draft step after the target's prefill of P tokens and one decode step (S = P + 1 cached positions,
    more than the window W = 4): transformers' FlopCounterMode on the assistant's forward with the K/V the target
    returns, as SinglePositionMultiTokenCandidateGenerator passes them, equals llmath's eager decode step at
    S0 = P (its query at the last seen position P, reading the S0 + 1 cached positions; sliding layers read
    min(S0 + 1, W)). The K/V the draft reads are the target's tensors, once per assistant layer."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    target, assistant, cfg = _tiny_pair(unified, ordered)
    B, P = 2, 6
    ids = torch.randint(0, 256, (B, P + 1))
    run = dict(use_cache=True, return_shared_kv_states=True, output_hidden_states=True)
    with torch.no_grad(), _all_reuse():
        out = target(ids[:, :P], **run)
        kv = dict(target(ids[:, P:], past_key_values=out.past_key_values, **run).shared_kv_states)
        with FlopCounterMode(display=False) as fc:
            assistant(inputs_embeds=torch.randn(B, 1, 2 * 64), position_ids=torch.tensor([[P]]), shared_kv_states=kv)
    cfg.to_json_file(tmp_path / "a.json", use_diff=False)
    spec = spec_from_config(json.loads((tmp_path / "a.json").read_text()))
    assert matmul_flops(spec, "decode", Scenario(B, 1, P)) == fc.get_total_flops()
    read = sum(x.get("kv_read", 0) for x in values_by_op(spec, "decode", "flash", Scenario(B, 1, P)).values())
    layer_types = cfg.text_config.layer_types
    assert read == sum(kv[t][0].numel() + kv[t][1].numel() for t in layer_types)
    assert kv["sliding_attention"][0].shape[2] == 4 and kv["full_attention"][0].shape[2] == P + 1  # W, S


def test_assistant_refuses_what_transformers_refuses(tmp_path):
    cfg = e2b_assistant_config(tmp_path)
    ple = dict(cfg, text_config=dict(cfg["text_config"], hidden_size_per_layer_input=256))
    with pytest.raises(ConfigError, match="hidden_size_per_layer_input=256 must be 0"):
        spec_from_config(ple, "a")
    own = dict(cfg, text_config=dict(cfg["text_config"], num_kv_shared_layers=2))
    with pytest.raises(ConfigError, match="num_kv_shared_layers=2 must equal num_hidden_layers=4"):
        spec_from_config(own, "a")


def _pair_files(tmp_path, target_width=1536):
    """An assistant (:func:`e2b_assistant_config`) and a Gemma 4 target of width 1536 whose last 10 layers
    share K/V, both written as config.json files. The target's other values are Gemma4TextConfig's defaults
    (4 K/V heads of 256 on sliding layers, window 512, full layers of 512), the assistant's text_config too,
    so the K/V shapes it reads match; the pair is synthetic, not a checkpoint's."""
    from transformers import Gemma4TextConfig

    target = tmp_path / "target.json"
    Gemma4TextConfig(hidden_size=target_width, num_kv_shared_layers=10).to_json_file(target, use_diff=False)
    e2b_assistant_config(tmp_path)
    return str(target), str(tmp_path / "assistant.json")


def test_draft_step_reads_the_targets_cache_by_arithmetic(tmp_path):
    _, assistant = _pair_files(tmp_path)
    spec = spec_from_config(json.loads(open(assistant).read()))
    # its 4 layers: 3 sliding (window 512; 4 K/V heads of 256) and the last full (4 K/V heads of 512)
    assert spec.layer_windows == (512, 512, 512, None)
    # a draft step over the target's 1024 cached positions (S0 = 1023): the sliding layers read 512 positions,
    # the full one 1024: 3 · 2·4·256·512 + 2·4·512·1024 = 3,145,728 + 4,194,304 = 7,340,032 elements
    ops = values_by_op(spec, "decode", "flash", Scenario(1, 1, 1023))
    assert sum(x.get("kv_read", 0) for x in ops.values()) == 7_340_032
    assert sum(x.get("kv_write", 0) for x in ops.values()) == 0


def test_assistant_drafts_for_its_target_end_to_end(tmp_path, capsys):
    from helpers import run_cli

    from llmath.deploy.service import serve
    from llmath.deploy.speculative import Speculation, draft_device, round_time
    from llmath.deploy.step import Device
    from llmath.hardware.efficiency import efficiency
    from llmath.hardware.registry import get
    from llmath.model.registry import resolve

    target, assistant = _pair_files(tmp_path)
    hw = get("h100-sxm")
    dev = Device(resolve(target), hw, Precision(), efficiency("expected", hw))
    s = Speculation("draft", 3, 2.5, assistant)
    d = draft_device(dev, s)
    # a round: 3 draft steps, each reading the target's 2000 cached positions (S0 = 1999), + a verify of width 4
    assert round_time(dev, d, s, 8, 2000) == pytest.approx(
        3 * d.iteration(8, 1999).time_s + dev.verify(8, 4, 2000).time_s
    )
    with_draft = serve(
        target, "h100-sxm", workload=Workload(concurrency=8, prompt=1024, gen=128), speculation=s
    ).metrics
    plain = serve(target, "h100-sxm", workload=Workload(concurrency=8, prompt=1024, gen=128)).metrics
    assert with_draft["tpot_s"] < plain["tpot_s"]  # 2.5 tokens a round for a 4-layer draft's cost
    code, out, err = run_cli(capsys, "analyze", target, "-H", "h100-sxm", "--concurrency", "8", "--prompt", "1024",
                             "--gen", "128", "--spec-method", "draft", "--draft-model", assistant,
                             "--spec-tokens", "3", "--acceptance", "2.5", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["tpot_s"] == pytest.approx(with_draft["tpot_s"])


def test_assistant_runs_only_as_the_draft_of_its_own_target(tmp_path):
    from llmath.analysis import analyze
    from llmath.deploy.service import serve
    from llmath.deploy.speculative import Speculation
    from llmath.errors import WorkloadError

    target, assistant = _pair_files(tmp_path, target_width=2304)
    with pytest.raises(WorkloadError, match="is a draft model that runs on its target's cache"):
        analyze(assistant, "h100-sxm")
    with pytest.raises(WorkloadError, match="trained on a target of width 1536 .* has 2304"):
        serve(
            target,
            "h100-sxm",
            workload=Workload(concurrency=8, prompt=1024, gen=128),
            speculation=Speculation("draft", 3, 2.5, assistant),
        )
