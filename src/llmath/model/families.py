"""The adapter tables: one row per ``model_type``, the fixed architecture facts of the family and the
config keys it reads them from (see :mod:`llmath.model.hf`, which builds a spec from a row and a file)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from llmath.model import families_encdec, mixer_configs
from llmath.model.family_facts import (
    COHERE_LIKE,
    GEMMA2_LIKE,
    GEMMA3_LIKE,
    GEMMA_LIKE,
    GPT_LIKE,
    LLAMA_LIKE,
    LLAMA_NO_BIAS,
    LLAMA_QK_NORM,
    MOE_KINDS,
    QWEN2_LIKE,
    QWEN3_LIKE,
    _all_bias,
    _attn_bias,
    _ernie_moe_layers,
    _every,
    _falcon_kv_heads,
    _k,
    _llama4_moe_layers,
    _llama4_types,
    _mlp_layer_types,
    _smollm3_types,
    moe_keys,
    router_groups,
)

# Bases shared by this table's rows (the shared ones across modules live in family_facts.py)
# attention_bias: q_a, kv_a, o; n_group: int | None = 8 in DeepseekV3Config and DeepseekV32Config
# (configuration_deepseek_v3.py, configuration_deepseek_v32.py, transformers 5.23)
_DEEPSEEK_V3 = dict(LLAMA_LIKE, ffn_bias=False, moe=dict(MOE_KINDS["deepseek"], **router_groups(8)), mla=True)
_OLMOE = dict(LLAMA_NO_BIAS, qk_norm="full", moe="mixtral")
_GLM = dict(LLAMA_LIKE, **_attn_bias(_k("attention_bias", True), o=False), ffn_bias=False)
_ERNIE = dict(LLAMA_LIKE, **_all_bias(_k("use_bias", False)))
#: GPT-J's block: attention and MLP in parallel on one LayerNorm, partial rotary, a biased LM head
_GPTJ_BLOCK = dict(
    GPT_LIKE, position="rotary", parallel=True, norms_per_layer=1, lm_head_bias=True, activation="gelu_new"
)
_GRANITE_SHARED = moe_keys("num_local_experts", "intermediate_size", shared_width="shared_intermediate_size")

_ROWS: dict[str, dict[str, Any]] = {
    # state-space families (model/mixer_configs.py reads their widths and per-layer mixer kinds)
    "mamba": dict(norm="rms", build=mixer_configs.mamba),
    "falcon_mamba": dict(norm="rms", build=mixer_configs.mamba),
    "mamba2": dict(norm="rms", build=mixer_configs.mamba2),
    # Jamba: Mamba-1 and attention layers (no positional encoding), MoE every expert_layer_period-th layer
    "jamba": dict(
        LLAMA_LIKE,
        **_attn_bias(False),
        position="none",
        moe=moe_keys("num_experts", "intermediate_size", layers=mixer_configs.jamba_moe_layers),
        mixers=mixer_configs.jamba,
    ),
    "bamba": dict(LLAMA_LIKE, **_attn_bias(_k("attention_bias", False)), mixers=mixer_configs.bamba),
    "llama": LLAMA_LIKE,
    "granite": LLAMA_LIKE,
    "mistral": LLAMA_NO_BIAS,
    "mixtral": dict(LLAMA_NO_BIAS, moe="mixtral"),
    "phi3": LLAMA_NO_BIAS,
    "qwen2": QWEN2_LIKE,
    "qwen2_moe": dict(QWEN2_LIKE, **_attn_bias(_k("qkv_bias", True), o=False), moe="qwen2_moe"),
    "qwen3": QWEN3_LIKE,
    "qwen3_moe": dict(QWEN3_LIKE, moe="qwen3_moe"),
    "gemma": GEMMA_LIKE,
    "gemma2": dict(GEMMA2_LIKE, windows="alternate"),
    "gemma3_text": dict(GEMMA3_LIKE, windows="every"),
    "olmo": dict(LLAMA_LIKE, norm="layer_noparam", ffn_bias=False),
    "olmo2": dict(LLAMA_LIKE, ffn_bias=False, qk_norm="full"),
    "cohere": dict(COHERE_LIKE, qk_norm=lambda c: "full" if c.get("use_qk_norm") else "none"),
    "phi": dict(_GPTJ_BLOCK, qk_norm=lambda c: "full" if c.get("qk_layernorm") else "none"),
    "starcoder2": dict(
        GPT_LIKE,
        position="rotary",
        **_all_bias(_k("use_bias", True)),
        norms_per_layer=2,
        activation="gelu_tanh",
    ),
    "gpt2": dict(GPT_LIKE, position="learned", norms_per_layer=2, activation="gelu_new", ffn_default=4),
    "gpt_neox": dict(
        GPT_LIKE,
        position="rotary",
        **_attn_bias(_k("attention_bias", True)),
        parallel=_k("use_parallel_residual", True),
        norms_per_layer=2,
        activation="gelu",
    ),
    "gptj": dict(_GPTJ_BLOCK, **_attn_bias(False), ffn_default=4),
    "opt": dict(
        GPT_LIKE,
        position="learned",
        position_offset=2,
        **_all_bias(_k("enable_bias", True)),
        norms_per_layer=2,
        activation="relu",
        final_norm=_k("do_layer_norm_before", True),
    ),
    "bloom": dict(
        GPT_LIKE, position="alibi", norms_per_layer=2, embedding_norm=True, activation="gelu_tanh", ffn_default=4
    ),
    "falcon": dict(
        GPT_LIKE,
        **_all_bias(_k("bias", False)),
        parallel=_k("parallel_attn", True),
        norms_per_layer="falcon",
        activation="gelu",
        ffn_default=4,
        kv_heads=_falcon_kv_heads,
        position=lambda c: "alibi" if c.get("alibi") else "rotary",
    ),
    # DeepSeek-V2's router groups its experts only under topk_method "group_limited_greedy"; DeepseekV2Config
    # defaults it to "greedy" and n_group to None (configuration_deepseek_v2.py; modeling_deepseek_v2.py
    # DeepseekV2TopkRouter.forward)
    "deepseek_v2": dict(
        LLAMA_NO_BIAS,
        moe=dict(MOE_KINDS["deepseek"], **router_groups(None, ("topk_method", "group_limited_greedy", "greedy"))),
        mla=True,
    ),
    # attention_bias: q_a_proj, kv_a_proj_with_mqa and o_proj biases (DeepseekV3Attention); none elsewhere
    "deepseek_v3": _DEEPSEEK_V3,
    # DeepSeek-V3.2: V3 plus the lightning indexer of DeepSeek Sparse Attention in every layer
    "deepseek_v32": dict(_DEEPSEEK_V3, dsa=True),
    "gpt_oss": dict(
        LLAMA_LIKE, **_attn_bias(True), ffn_bias=False, moe="gpt_oss", attn_sinks=True, windows="alternate"
    ),
    # ---- dense families whose keys are Llama's (transformers builds internlm3 / iquestcoder as Llama)
    "internlm3": LLAMA_LIKE,
    "iquestcoder": LLAMA_LIKE,
    "helium": LLAMA_LIKE,
    "hyperclovax": dict(LLAMA_LIKE, norms_per_layer=lambda c: 4 if c.get("use_post_norm") else 2),
    "cwm": dict(LLAMA_LIKE, **_attn_bias(False), windows=_every(4, full_first=True)),
    "ministral3": LLAMA_NO_BIAS,
    "smollm3": dict(LLAMA_LIKE, windows=_smollm3_types),
    "arcee": dict(LLAMA_LIKE, ffn="mlp", activation="relu2"),
    "jais2": dict(LLAMA_LIKE, norm="layer", ffn="mlp", activation="relu2"),
    "nanochat": dict(LLAMA_LIKE, norm="rms_noparam", ffn="mlp", activation="relu2"),
    "seed_oss": dict(LLAMA_LIKE, **_attn_bias(_k("attention_bias", True), o=_k("attention_out_bias", False))),
    "glm": _GLM,
    "glm4": dict(_GLM, norms_per_layer=4),
    # GLM-4.1V's language model (transformers 5.23 modeling_glm4v.py Glm4vTextAttention): GLM-4's four norms, its
    # q/k/v projections built with bias=True whatever the config's attention_bias says, o_proj without
    "glm4v_text": dict(_GLM, q_bias=True, k_bias=True, v_bias=True, norms_per_layer=4),
    "ernie4_5": _ERNIE,
    "exaone4": dict(LLAMA_NO_BIAS, qk_norm="head", windows=_every(4, key="sliding_window_pattern")),
    "olmo3": dict(LLAMA_NO_BIAS, qk_norm="full", windows=_every(4)),
    "cohere2": dict(COHERE_LIKE, windows=_every(4, key="sliding_window_pattern")),
    "vaultgemma": dict(GEMMA_LIKE, softcap=True, windows="alternate"),
    "granite_swa": dict(LLAMA_LIKE, attn_sinks=True, windows=_every(4, full_first=True)),
    "stablelm": dict(
        LLAMA_LIKE,
        norm="layer",
        **_attn_bias(_k("use_qkv_bias", False), o=False),
        ffn_bias=False,
        parallel=_k("use_parallel_residual", False),
        norms_per_layer=lambda c: 1 if c.get("use_parallel_residual") else 2,
        qk_norm=lambda c: "per_head" if c.get("qk_layernorm") else "none",  # StableLM 2 12B
    ),
    "persimmon": dict(
        GPT_LIKE,
        position="rotary",
        activation="relu2",
        qk_norm=lambda c: "head" if c.get("qk_layernorm", True) else "none",
    ),
    # The 'local' layers only mask to window_size: transformers caches and scores every position
    # (modeling_gpt_neo.py builds the mask, the cache is a full DynamicCache), so llmath counts them
    # as full-attention layers; the local layers' pairs beyond the window are over-counted under flash.
    "gpt_neo": dict(GPT_LIKE, position="learned", **_attn_bias(False, o=True), activation="gelu_new", ffn_default=4),
    "gpt_bigcode": dict(
        GPT_LIKE,
        position="learned",
        activation="gelu_tanh",
        ffn_default=4,
        kv_heads=lambda c, n: 1 if c.get("multi_query", True) else n,
    ),
    # ---- MoE families: keys per family, layers per family
    "olmoe": _OLMOE,
    "flex_olmo": _OLMOE,
    # MiniMaxM2Attention: q_norm = MiniMaxM2RMSNorm(head_dim · num_attention_heads) over the flattened q (k likewise;
    # transformers models/minimax_m2/modeling_minimax_m2.py)
    "minimax_m2": dict(_OLMOE, qk_norm_spans_heads=True),
    "granitemoe": dict(LLAMA_LIKE, ffn_bias=False, moe="mixtral"),
    "granitemoeshared": dict(LLAMA_LIKE, ffn_bias=False, moe=_GRANITE_SHARED),
    # Granite-4.0-H: granitemoeshared's layers with Mamba-2 mixers where layer_types says so; rotary only
    # with position_embedding_type "rope" (NoPE otherwise, as GraniteMoeHybridConfig defaults)
    "granitemoehybrid": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        moe=_GRANITE_SHARED,
        position=lambda c: "rotary" if c.get("position_embedding_type") == "rope" else "none",
        mixers=mixer_configs.granite_hybrid,
    ),
    "phimoe": dict(LLAMA_LIKE, norm="layer", ffn_bias=False, moe="mixtral", lm_head_bias=_k("lm_head_bias", False)),
    "glm4_moe": dict(
        _GLM,
        **_attn_bias(_k("attention_bias", False), o=False),
        qk_norm=lambda c: "head" if c.get("use_qk_norm") else "none",
        moe="deepseek",
        head_dim_floor=True,
    ),
    "solar_open": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        ffn_default=0,
        # n_group: int = 1 (configuration_solar_open.py)
        moe=moe_keys("n_routed_experts", "moe_intermediate_size", shared_count="n_shared_experts", **router_groups(1)),
    ),
    "exaone_moe": dict(
        LLAMA_NO_BIAS,
        qk_norm="head",
        windows=_every(4, key="sliding_window_pattern"),
        moe=moe_keys(
            "num_experts",
            "moe_intermediate_size",
            shared_count="num_shared_experts",
            layers=_mlp_layer_types,
            **router_groups(1),  # n_group: int = 1 (configuration_exaone_moe.py)
        ),
    ),
    "mellum": dict(LLAMA_QK_NORM, moe=moe_keys("num_local_experts", "moe_intermediate_size", layers=_mlp_layer_types)),
    "granitemoe_swa": dict(
        LLAMA_LIKE, ffn_bias=False, moe="mixtral", attn_sinks=True, windows=_every(4, full_first=True)
    ),
    # ---- MLA families (DeepSeek's latent attention keys)
    "minicpm3": dict(LLAMA_NO_BIAS, mla=True),
    "youtu": dict(LLAMA_NO_BIAS, mla=True),
    "glm4_moe_lite": dict(
        LLAMA_NO_BIAS,
        mla=True,
        moe=moe_keys(
            "n_routed_experts",
            "moe_intermediate_size",
            shared_count="n_shared_experts",
            layers=_mlp_layer_types,
            **router_groups(1),  # n_group: int = 1 (configuration_glm4_moe_lite.py)
        ),
    ),
    "ernie4_5_moe": dict(
        _ERNIE,
        moe=moe_keys(
            "moe_num_experts",
            "moe_intermediate_size",
            top_k="moe_k",
            shared_count="moe_num_shared_experts",
            layers=_ernie_moe_layers,
            router_score_bias=True,
        ),
    ),
    "ministral": LLAMA_NO_BIAS,
    "hunyuan_v1_dense": LLAMA_QK_NORM,
    "nemotron": dict(LLAMA_LIKE, norm="layer", ffn="mlp", activation="relu2"),
    # ---- GPT-era decoders
    "openai-gpt": dict(  # post-LN blocks, no final norm (modeling_openai.py)
        GPT_LIKE, position="learned", activation="gelu", ffn_default=4, final_norm=False
    ),
    "xglm": dict(  # sinusoidal positions: a buffer in transformers, not parameters
        GPT_LIKE,
        position="sinusoidal",
        activation="gelu",
        embedding_scale=lambda c: bool(c.get("scale_embedding", True)),
    ),
    "ctrl": dict(GPT_LIKE, position="sinusoidal", activation="relu", embedding_scale=True, lm_head_bias=True),
    "apertus": dict(LLAMA_LIKE, ffn="mlp", activation="xielu", activation_params=2, qk_norm="head"),
    "bitnet": dict(LLAMA_LIKE, activation="relu2", sub_norms=True),
    # every layer: the routed experts plus a shared MLP of the dense width (modeling_hunyuan_v1_moe.py)
    "hunyuan_v1_moe": dict(
        LLAMA_QK_NORM,
        moe=moe_keys("num_experts", "intermediate_size", top_k="moe_topk", shared_width="intermediate_size"),
    ),
    "hy_v3": dict(
        LLAMA_QK_NORM,
        moe=moe_keys(
            "num_experts", "moe_intermediate_size", shared_count="num_shared_experts", layers=_mlp_layer_types
        ),
    ),
    "kolibri1": dict(
        LLAMA_NO_BIAS,
        ffn_default=0,
        qk_norm="head",
        norms_per_layer=4,
        windows=_every(5),
        moe=moe_keys("num_local_experts", "moe_intermediate_size", shared_width="shared_expert_intermediate_size"),
    ),
    # Llama-4: dense layers (intermediate_size_mlp) interleaved with MoE layers (routed experts of
    # intermediate_size plus one shared expert of that width); rope layers chunked, NoPE layers full. The
    # L2 q/k norm has no parameters.
    "llama4_text": dict(
        LLAMA_LIKE,
        ffn_bias=False,
        ffn_keys=("intermediate_size_mlp",),
        windows=_llama4_types,
        window_key="attention_chunk_size",
        chunked_windows=True,
        moe=moe_keys(
            "num_local_experts",
            "intermediate_size",
            shared_width="intermediate_size",
            layers=_llama4_moe_layers,
            dense_eager=True,
        ),
    ),
    "t5": dict(
        norm="rms",
        norm_bias=False,
        ffn="t5",
        position="relative",
        **_all_bias(False),
        norms_per_layer=3,
        encdec="t5",
    ),
    # The original Transformer (Vaswani et al. 2017): post-LN, no final stack norms, shared embeddings.
    "transformer": dict(GPT_LIKE, position="sinusoidal", norms_per_layer=3, encdec="transformer", activation="relu"),
    "bart": families_encdec.BART_LIKE,  # BART and its descendants: model/families_encdec.py
    # Whisper (Radford et al. 2022): pre-LN stacks with final norms, k_proj without bias, the decoder's
    # learned table of max_target_positions rows; the encoder's audio front end: EncoderSpec.frontend.
    "whisper": dict(
        GPT_LIKE,
        k_bias=False,
        position="learned",
        positions_keys=("max_target_positions",),
        norms_per_layer=3,
        encdec="whisper",
        encoder_fields=families_encdec.external_whisper_encoder,
        activation="gelu",
    ),
}
_ROWS["codegen"] = _ROWS["gptj"]  # CodeGen is GPT-J's block (parallel attention + MLP, partial rotary)


def _other_tables() -> tuple[dict[str, dict[str, Any]], ...]:
    """The other modules' tables, in the order they extend this one (none repeats a model_type)."""
    from llmath.model import (
        families_assist,
        families_beam,
        families_bigbird,
        families_blt,
        families_compass,
        families_cpmant,
        families_dense,
        families_dsv4,
        families_gemma3n,
        families_hrm,
        families_idx,
        families_inkling,
        families_linear,
        families_moe,
        families_moshi,
        families_multimodal,
        families_musicgen,
        families_nas,
        families_prophetnet,
        families_qwen4,
        families_recurrent,
        families_ssm,
        families_zaya,
    )

    return (
        families_dense.ADAPTERS,  # dense decoders with an unusual feature (MPT, DiffLlama, ...)
        families_ssm.ADAPTERS,  # state-space hybrids: Nemotron-H, Falcon-H1, Zamba, Zamba2
        families_recurrent.ADAPTERS,  # short-conv and recurrent families (model/families_recurrent.py)
        families_moe.ADAPTERS,  # MoE / sparse-attention families (model/families_moe.py)
        families_multimodal.ADAPTERS,  # model/families_multimodal.py
        families_linear.ADAPTERS,  # linear-attention hybrids (model/families_linear.py)
        families_beam.ADAPTERS,  # Beam (model/families_beam.py)
        families_zaya.ADAPTERS,  # ZAYA1: compressed convolutional attention (model/families_zaya.py)
        families_hrm.ADAPTERS,  # HRM-Text: stacks run in cycles (model/families_hrm.py)
        families_compass.ADAPTERS,  # Cohere Compass's text decoder (model/families_compass.py)
        families_dsv4.ADAPTERS,  # DeepSeek-V4 (model/families_dsv4.py)
        families_gemma3n.ADAPTERS,  # Gemma 3n's language model (model/families_gemma3n.py)
        families_qwen4.ADAPTERS,  # Qwen4-Exp (model/families_qwen4.py)
        families_encdec.ADAPTERS,  # BART's descendants: mBART, PLBart, MVP, Blenderbot, Pegasus, Marian
        families_inkling.ADAPTERS,  # Inkling, Inkling-2 (model/families_inkling.py)
        families_cpmant.ADAPTERS,  # CPM-Ant: a prompt prefix, relative positions (model/families_cpmant.py)
        families_moshi.ADAPTERS,  # Moshi's temporal transformer (model/families_moshi.py)
        families_nas.ADAPTERS,  # Nemotron-NAS: per-layer attention and FFN widths (families_nas.py)
        families_idx.ADAPTERS,  # indexed sparse attention: A.X K2, Dots 3 Note, MiniMax-M3 (families_idx.py)
        families_musicgen.ADAPTERS,  # MusicGen decoder and composite (model/families_musicgen.py)
        families_prophetnet.ADAPTERS,  # ProphetNet's n-stream encoder-decoder (model/families_prophetnet.py)
        families_bigbird.ADAPTERS,  # BigBird-Pegasus (model/families_bigbird.py)
        families_blt.ADAPTERS,  # the Byte Latent Transformer (model/families_blt.py, ops/blt.py)
        families_assist.ADAPTERS,  # Gemma 4's assistants, draft models on the target's K/V (families_assist.py)
    )


class _Adapters(Mapping[str, dict[str, Any]]):
    """Every family's row by ``model_type``: this module's rows at once, the other modules' tables imported
    the first time a look-up misses this module's rows or the whole table is listed (a plan of a Llama or
    DeepSeek model never imports the modules of MusicGen, BLT, ...)."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        self._rows = rows
        self._complete = False

    def _all(self) -> dict[str, dict[str, Any]]:
        if not self._complete:
            for table in _other_tables():
                self._rows.update(table)
            self._complete = True
        return self._rows

    def __getitem__(self, model_type: str) -> dict[str, Any]:
        row = self._rows.get(model_type)
        return row if row is not None else self._all()[model_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


ADAPTERS: Mapping[str, dict[str, Any]] = _Adapters(_ROWS)
