"""The typed, validated model spec: one dataclass that every other layer reads.

Architecture differences are explicit fields, never behaviour keyed on a model's name. Derived sizes
(``q_dim``, ``kv_dim``, ...) live here and nowhere else. Size fields have no defaults, so no entry
silently inherits a width. Validation raises :class:`SpecError` naming the field, the rule and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from llmath.model.spec_assistant import AssistantSpec
from llmath.model.spec_blt import BltSpec
from llmath.model.spec_compressed import CompressedSpec
from llmath.model.spec_encoder import EncoderSpec
from llmath.model.spec_hyper import HyperSpec, NGramSpec, QSASpec
from llmath.model.spec_index import BlockIndexSpec
from llmath.model.spec_inkling import InklingSpec
from llmath.model.spec_mixer import LINEAR_ATTENTION_KINDS, MixerSpec, SharedBlockSpec
from llmath.model.spec_mla import MLASpec
from llmath.model.spec_moe import MoESpec
from llmath.model.spec_parts import SpecParts, compose
from llmath.model.spec_prophet import ProphetSpec
from llmath.model.spec_rules import validate_spec
from llmath.model.spec_vision import VisionSpec

if TYPE_CHECKING:
    from llmath.model.traits import Traits

NormKind = Literal["layer", "rms", "layer_noparam", "rms_noparam"]
FFNKind = Literal["mlp", "gated"]
PositionKind = Literal["learned", "sinusoidal", "rotary", "alibi", "relative", "none"]
AttentionKind = Literal["mha", "mla"]
# head: one norm of width H shared by the heads; full: over all heads' width; per_head: one of width H per head, no
QKNorm = Literal["none", "head", "full", "per_head", "l2"]  # bias (StableLM 2); l2: ZAYA's, a scale per K/V head
AttnGate = Literal["none", "head", "full"]


@dataclass(frozen=True)
class ModelSpec:
    """A transformer, as explicit fields.

    Attention is MHA/GQA/MQA through ``n_kv_heads`` (``head_dim`` is its own field: Gemma and Qwen3
    differ from ``d_model / n_heads``), or MLA through ``mla``. Per-layer variation lives in
    ``layer_windows`` (``None`` = full attention, else the sliding window) and ``layer_moe``.
    """

    name: str
    n_layers: int
    d_model: int
    vocab_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    ffn: FFNKind
    norm: NormKind
    position: PositionKind
    model_type: str = "custom"
    activation: str = "silu"
    attention: AttentionKind = "mha"
    mla: MLASpec | None = None
    # Dots 3 Note: the MLA widths (heads, ranks, no indexer) of the sliding-window layers when not ``mla``'s
    window_mla: MLASpec | None = None
    q_bias: bool = False
    k_bias: bool = False
    v_bias: bool = False
    o_bias: bool = False
    qk_norm: QKNorm = "none"
    qk_norm_spans_heads: bool = False  # q, k normed over all heads at once (MiniMax-M2): TP ranks share, deploy/comm
    attn_gate: AttnGate = "none"  # sigmoid output gate: per channel (Qwen3-Next, in q_proj) or per head (Ling)
    attn_sinks: bool = False  # gpt-oss: one learned logit per head
    attn_experts: bool = False  # JetMoE MoA: q/o projections are experts (the MoE's count and top-k; N = top-k·K)
    attn_out_gate: bool = False  # AFMoE: sigmoid(gate_proj(x)) multiplies the attention output before o_proj
    attn_gate_per_head: bool = False  # Laguna: the gate is one value per head (D -> N), not per element
    gate_proj_bias: bool = False  # HRM-Text: that output gate's projection D -> N·H has a bias (its attention_bias)
    attn_gate_bias: bool = False  # Beam: a learned bias per head (N) added to that output gate before the sigmoid
    # Beam, Cohere Compass: the full-attention layers of a windowed model use no positional encoding (NoPE); the
    # sliding layers keep their rotary. nope_query_scale (Beam): those layers scale each query by a function of
    # its position (scalable softmax) instead
    nope_full: bool = False
    nope_query_scale: bool = False
    window_sinks_only: bool = False  # MiMo-V2-Flash: the sinks are on the sliding-window layers only
    v_head_dim: int | None = None  # value (and output-projection input) width per head when not head_dim
    window_kv_heads: int | None = None  # K/V heads of the sliding-window layers when not n_kv_heads (MiMo)
    ffn_bias: bool = False
    activation_params: int = 0  # learned scalars of each dense FFN's activation (Apertus xIELU: 2)
    sub_norms: bool = False  # BitNet: norms before o_proj (width N·H) and before the down projection (F)
    moe: MoESpec | None = None
    layer_moe: tuple[bool, ...] = ()
    layer_windows: tuple[int | None, ...] = ()
    # DSA (GLM-5): False on layers that reuse the previous layer's top-k instead of running their own indexer;
    # with ``block_index`` (MiniMax-M3): True on the block-sparse layers, False on the dense ones
    layer_indexer: tuple[bool, ...] = ()
    block_index: BlockIndexSpec | None = None
    norm_bias: bool = True  # LayerNorm with bias; ignored for rms / layer_noparam
    norms_per_layer: int = 2
    final_norm: bool = True
    embedding_norm: bool = False  # BLOOM word_embeddings_layernorm
    max_positions: int | None = None
    # the config's length keys and RoPE scaling entries the engines derive their length limit from (length_config.py)
    length_config: tuple[tuple[str, int | float | str], ...] = ()
    position_table_offset: int = 0  # OPT/BART learned tables have 2 extra rows
    rotary_dim: int | None = None  # rotary width per head (partial rotary: phi, gpt-neox, gpt-j)
    relative_buckets: int = 0  # T5 relative attention bias buckets
    tie_embeddings: bool = False
    lm_head_bias: bool = False
    parallel_block: bool = False
    embedding_scale: bool = False  # Gemma multiplies embeddings by sqrt(d)
    chunked_windows: bool = False  # Llama-4: windowed layers are chunked attention (flash: chunk pairs only)
    attn_softcap: float | None = None
    diff_attention: bool = False  # DiffLlama: differential attention, softmax(Q1K1) − λ·softmax(Q2K2), ops/variants.py
    last_o_bias: bool = False  # GPT-NeoX-Japanese: only the last layer's attention output has a bias (width D)
    first_attn_norm: bool = True  # ModernBERT-decoder: False, layer 0 has no norm before attention
    head_dense: bool = False  # ModernBERT-decoder: dense D -> D, activation and norm before the LM head
    head_dense_bias: bool = False  # that dense's bias (its classifier_bias)
    dynamic_mask: bool = False  # Doge: dynamic-mask attention, dt_proj (K·H -> K) and A (K) per layer, ops/variants.py
    residual_scale: bool = False  # Doge: each residual add scales the skip stream by a learned vector (D)
    final_softcap: float | None = None
    # ZAYA's compressed convolutional attention (ops/cca.py): the kernel widths (t0, t1) of the depthwise and the
    # grouped causal convs over q and k; the value heads are half current, half the previous token's. None: none
    cca_kernels: tuple[int, int] | None = None
    # ZAYA: each residual add is (x + b1)·s1 + (skip + b2)·s2 with four learned vectors of width D, and the
    # embeddings are (e + b)·s (two more): modeling_zaya.py ZayaResidualScaling, input_hidden_states_scale
    residual_affine: bool = False
    # HRM-Text's hierarchical recurrence (H_cycles, L_cycles): the n_layers decoder layers are layer *runs*; two
    # stacks of n_layers / (H·(L+1)) layers each (L and H) run H·L and H times per forward (ops/cycles.py), so
    # parameters count 2 · n_layers / (H·(L+1)) layers and FLOPs, weight reads and the KV cache every run
    recurrence: tuple[int, int] | None = None
    encoder: EncoderSpec | None = None
    prophet: ProphetSpec | None = None  # ProphetNet's n-stream decoder (model/spec_prophet.py, ops/prophet.py)
    mixer: MixerSpec | None = None  # the non-attention mixer of the layers layer_mixers marks with its kind
    # per layer: "attention", the mixer's kind, "attention+<kind>" (Falcon-H1: both in parallel on one normed
    # input), "shared+<kind>" (Zamba: the shared block, then the mixer) or "none" (Nemotron-H's FFN-only /
    # MoE-only layers); default: all attention
    layer_mixers: tuple[str, ...] = ()
    mixer_ffn: bool = True  # mixer layers carry an FFN (hybrids); pure Mamba blocks are norm, mixer, residual
    hf_cache_kv_heads: int | None = None  # transformers caches this many K/V heads (Falcon: all N)
    attn_head_gate: bool = False  # LFM3: σ(g_proj(x)) per head (D -> N, no bias) scales the attention output
    eager_all_logits: bool = False  # xLSTM: transformers' head projects every position (no logits_to_keep)
    source: str = ""
    wrapper: str = ""  # a multimodal wrapper's model_type when this is its language model (text_config)
    towers_not_counted: tuple[str, ...] = ()  # the wrapper's sub-configs llmath cannot count (vision_config, ...)
    tower_params: tuple[tuple[str, int], ...] = ()  # counted towers: (component, parameters), model/towers.py
    attention_ffn: bool = True  # attention layers carry an FFN (Nemotron-H: its attention layers do not)
    shared_block: SharedBlockSpec | None = None  # Zamba's shared attention block of the "shared+" layers
    # the SSM (temporal) state's format the config asks serving to keep (its ``mamba_ssm_cache_dtype``, as
    # vLLM reads it): None = as the KV cache; only Mamba, Mamba-2 and Gated DeltaNet states take it
    ssm_state_dtype: str | None = None
    # Gemma 4: the full-attention layers' own head width and K/V heads (None: head_dim / n_kv_heads)
    full_head_dim: int | None = None
    full_kv_heads: int | None = None
    # Gemma 4's per-layer embeddings (PLE): a table of per_layer_vocab rows × n_layers·per_layer_width and
    # per-layer gate/projection of that width (ops/per_layer.py); 0: none
    per_layer_width: int = 0
    per_layer_vocab: int = 0
    # A.X K2's gated RMSNorm: the norm before attention (every layer) and before the MoE (MoE layers) is
    # followed by a low-rank gate D -> r -> D (SiLU between, no bias) whose sigmoid scales the normed input
    norm_gate_rank: int = 0
    inkling: InklingSpec | None = None  # Inkling / Inkling-2 layers (ops/inkling.py)
    blt: BltSpec | None = None  # the Byte Latent Transformer's stacks (ops/blt.py); the spec's own widths: its global
    # DeepSeek-V4: the attention of :class:`CompressedSpec`, each layer's compressor ("" none, "csa", "hca"), and
    # the hyper-connection streams (the residual is ``mhc_streams`` copies of D, 0: a plain residual; ops/mhc.py)
    compressed: CompressedSpec | None = None
    layer_compress: tuple[str, ...] = ()
    mhc_streams: int = 0
    mhc_comb: bool = True  # mHC's n × n stream mixing (DeepSeek-V4); False: independent HC (HY-V4's iHC)
    # KV sharing (Gemma 3n, Gemma 4: num_kv_shared_layers): True on layers that reuse the K/V of the last earlier
    # layer of their attention kind; they project no K/V and keep no cache (ops/attention.py)
    layer_kv_shared: tuple[bool, ...] = ()
    kv_shared_last_only: bool = False  # Gemma 4: eager prefill runs its KV-shared layers on the logit rows only
    kv_shared_ffn_mult: int = 1  # Gemma 4's use_double_wide_mlp: the KV-shared layers' FFN is this many times wider
    full_k_eq_v: bool = False  # Gemma 4's attention_k_eq_v: full-attention layers take V from the K projection
    moe_beside_ffn: bool = False  # Gemma 4's enable_moe_block: the MoE runs beside the dense FFN, outputs summed
    # Gemma 3n (ops/altup.py): AltUp's copies of the hidden state (0: none), LAuReL's rank (0: none) and the
    # layers whose FFN gate goes through the gaussian top-k (activation_sparsity_pattern > 0)
    altup_inputs: int = 0
    laurel_rank: int = 0
    layer_ffn_sparse: tuple[bool, ...] = ()
    layer_d_ff: tuple[int, ...] = ()  # each layer's dense FFN width when they differ (Gemma 3n's MatFormer slices)
    # Qwen4-Exp (model/spec_hyper.py): hyper-connection residual streams, the QSA indexer of its attention
    # layers, and the hashed n-gram embeddings of the layers layer_mixers marks "ple+<mixer kind>"
    hyper: HyperSpec | None = None
    qsa: QSASpec | None = None
    ngram: NGramSpec | None = None
    # CPM-Ant: positions the model prepends to every sequence (its prompt_length prompt tokens): a pass from an
    # empty cache runs them through every layer and the cache keeps them (ops/core.py ``with_prefix``)
    prefix_positions: int = 0
    # token-table rows beyond vocab_size, not in the LM head: Mllama's 8 image/special rows, CPM-Ant's
    # prompt_types·prompt_length prompt rows, Moshi's one extra row
    extra_token_rows: int = 0
    segment_rows: int = 0  # CPM-Ant: a segment table whose row is added to every token's embedding
    # MusicGen (model/families_musicgen.py): parallel codebook streams, each with its own token table (summed) and
    # LM head (0: one stream); the composite's text encoder, a spec of its own (T5) whose encoder pass is this
    # model's, and the width of its output that ``enc_to_dec_proj`` projects to d_model (0: no projection)
    codebooks: int = 0
    text_encoder: ModelSpec | None = None
    enc_proj: int = 0
    assistant: AssistantSpec | None = None  # a draft model on its target's cache (Gemma 4 assistants)
    vision: VisionSpec | None = None  # Llama 3.2 Vision's image encoder, for requests with images (spec_vision.py)
    mtp_modules: int = 0  # multi-token-prediction modules the checkpoint carries (hf.MTP_KEYS): MTP speculation

    def __post_init__(self) -> None:
        if not self.layer_moe:
            object.__setattr__(self, "layer_moe", (self.moe is not None,) * max(self.n_layers, 0))
        if not self.layer_windows:
            object.__setattr__(self, "layer_windows", (None,) * max(self.n_layers, 0))
        if not self.layer_mixers:
            object.__setattr__(self, "layer_mixers", ("attention",) * max(self.n_layers, 0))
        if not self.layer_indexer:
            object.__setattr__(self, "layer_indexer", (True,) * max(self.n_layers, 0))
        if not self.layer_compress:
            object.__setattr__(self, "layer_compress", ("",) * max(self.n_layers, 0))
        for f in ("layer_kv_shared", "layer_ffn_sparse"):
            if not getattr(self, f):
                object.__setattr__(self, f, (False,) * max(self.n_layers, 0))
        self.validate()

    def __hash__(self) -> int:  # specs key the compiled-table caches: hash the fields once
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))
            object.__setattr__(self, "_hash", h)
        return h

    # ---- validation -------------------------------------------------------------------------------
    def validate(self) -> None:
        """The rules of the fields (model/spec_rules.py)."""
        validate_spec(self)

    def mla_of(self, window: int | None) -> MLASpec | None:
        """The MLA widths of the layers of ``window``: ``window_mla`` for sliding layers when set, else ``mla``."""
        return self.window_mla if window is not None and self.window_mla is not None else self.mla

    def attention_widths(self, window: int | None) -> tuple[int, int]:
        """(K/V heads, head width) of the attention layers of ``window``: MiMo's windowed layers have their
        own K/V heads (``window_kv_heads``); Gemma 4's full-attention layers have their own head width and
        K/V heads (configuration_gemma4.py: ``global_head_dim``, ``num_global_key_value_heads``)."""
        if window is not None:  # MiMo: the sliding-window layers' own K/V heads
            return self.window_kv_heads or self.n_kv_heads, self.head_dim
        return self.full_kv_heads or self.n_kv_heads, self.full_head_dim or self.head_dim

    def ffn_width(self, i: int) -> int:
        """The dense FFN width of layer ``i`` (``layer_d_ff`` where layers differ, else ``d_ff``)."""
        return self.layer_d_ff[i] if self.layer_d_ff else self.d_ff

    def _needs_dense_ffn(self) -> bool:
        has_ffn = (self.layer_has_ffn(m) for m in self.layer_mixers)
        return any(f and not moe for f, moe in zip(has_ffn, self.layer_moe, strict=False))

    def layer_has_ffn(self, kind: str) -> bool:
        """Whether a layer of this ``layer_mixers`` kind carries an FFN (or MoE) after its mixer."""
        if kind == "none":
            return True
        return self.attention_ffn if kind.startswith("attention") else self.mixer_ffn

    # ---- derived sizes ----------------------------------------------------------------------------
    @property
    def group_size(self) -> int:
        """G = N / K query heads per KV head."""
        return self.n_heads // self.n_kv_heads

    @property
    def tower_total(self) -> int:
        """Parameters of a wrapper's counted towers (in the count and memory, not in the stages)."""
        return sum(n for _, n in self.tower_params)

    @property
    def traits(self) -> Traits:
        """What the layers above ops/ ask instead of the family (model/traits.py: declared by the parts)."""
        from llmath.model.traits import traits

        return traits(self)

    @property
    def parts(self) -> SpecParts:
        """The spec composed by concern, built once (model/spec_parts.py): what the layers above ops/ read."""
        if "_parts" not in self.__dict__:
            object.__setattr__(self, "_parts", compose(self))
        return self.__dict__["_parts"]

    @property
    def is_encoder_decoder(self) -> bool:
        return self.encoder is not None

    def layer_kinds(self) -> tuple[tuple[object, ...], ...]:
        """Each decoder layer's kind: everything that can differ between layers, as one tuple."""
        return tuple(
            zip(
                self.layer_windows, self.layer_moe, self.layer_mixers, self.layer_indexer, self.layer_kv_shared,
                self.layer_ffn_sparse, self.layer_d_ff or (self.d_ff,) * self.n_layers, self.layer_compress,
                strict=True,
            )
        )  # fmt: skip

    def with_layers(self, n_layers: int) -> ModelSpec:
        """The same architecture with the first ``n_layers`` layers (patterns truncated)."""
        return replace(
            self,
            n_layers=n_layers,
            layer_moe=self.layer_moe[:n_layers],
            layer_windows=self.layer_windows[:n_layers],
            layer_mixers=self.layer_mixers[:n_layers],
            layer_indexer=self.layer_indexer[:n_layers],
            layer_compress=self.layer_compress[:n_layers],
            layer_kv_shared=self.layer_kv_shared[:n_layers],
            layer_ffn_sparse=self.layer_ffn_sparse[:n_layers],
            layer_d_ff=self.layer_d_ff[:n_layers],
        )


__all__ = [
    "ModelSpec", "MoESpec", "MLASpec", "CompressedSpec", "MixerSpec", "EncoderSpec", "SharedBlockSpec", "HyperSpec",
    "QSASpec", "NGramSpec", "LINEAR_ATTENTION_KINDS", "InklingSpec", "AssistantSpec", "VisionSpec",
]  # fmt: skip
