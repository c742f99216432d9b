"""The typed, validated model spec: one dataclass that every other layer reads.

Architecture differences are explicit fields, never behaviour keyed on a model's name. Derived sizes
(``q_dim``, ``kv_dim``, ...) live here and nowhere else. Size fields have no defaults, so no entry
silently inherits a width. Validation raises :class:`SpecError` naming the field, the rule and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from llmath.errors import SpecError
from llmath.model.spec_assistant import AssistantSpec
from llmath.model.spec_blt import BltSpec
from llmath.model.spec_compressed import CompressedSpec
from llmath.model.spec_hyper import HyperSpec, NGramSpec, QSASpec, _positive
from llmath.model.spec_index import BlockIndexSpec
from llmath.model.spec_inkling import InklingSpec
from llmath.model.spec_mixer import LINEAR_ATTENTION_KINDS, MixerSpec, SharedBlockSpec
from llmath.model.spec_parts import SpecParts, compose
from llmath.model.spec_prophet import ProphetSpec
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
class MoESpec:
    """Mixture of experts in the FFN of the layers marked ``moe`` in :attr:`ModelSpec.layer_moe`.

    ``d_ff_expert`` is each routed expert's hidden width; shared experts are always active and are
    stored as one FFN of width ``d_ff_shared`` (DeepSeek: ``n_shared_experts * moe_intermediate_size``).
    """

    n_experts: int
    top_k: int
    d_ff_expert: int
    d_ff_shared: int = 0
    shared_gate: bool = False  # Qwen2-MoE: sigmoid gate Linear(D, 1) on the shared expert
    router_bias: bool = False  # gpt-oss router Linear has a bias
    expert_bias: bool = False  # gpt-oss experts have biases on gate_up and down
    router_score_bias: bool = False  # ERNIE-4.5: e_score_correction_bias is a parameter (E per layer)
    dense_eager: bool = False  # Llama-4: transformers runs every expert on every token (scores scale them)
    output_norm: bool = False  # A.X K1: a norm (with weights) over each MoE block's output
    output_bias: bool = False  # JetMoE: one bias vector (D) added to each MoE block's output
    shared_bias: bool = False  # Nemotron-H: the shared expert's projections have biases (its mlp_bias)
    # LongCat-Flash: identity ("zero-computation") experts the router may pick besides the n_experts real ones;
    # a token routed to one costs no matmul. llmath runs top_k real experts per token (see ops/moe.py)
    zero_experts: int = 0
    # ZAYA: the router is an MLP of this hidden width R (D -> R with bias, an RMSNorm, two R x R GELU layers with
    # bias, R -> E + 1: the extra class is a skip expert), its R-wide state carried to the next layer's router
    router_mlp: int = 0
    # Nemotron-3 Super/Ultra (moe_latent_size): the routed experts read and write an L-wide latent, projected
    # D -> L before them and L -> D after (ops/moe.py routed_experts); 0: they work at the model width
    latent: int = 0

    def validate(self, name: str) -> None:
        for f in ("n_experts", "top_k", "d_ff_expert"):
            _positive(name, f"moe.{f}", getattr(self, f))
        if self.top_k > self.n_experts:
            raise SpecError(
                f"{name!r}: moe.top_k={self.top_k} exceeds moe.n_experts={self.n_experts}; "
                "a token cannot be routed to more experts than exist"
            )
        if self.d_ff_shared < 0:
            raise SpecError(f"{name!r}: moe.d_ff_shared={self.d_ff_shared} must be >= 0")
        if self.router_mlp < 0:
            raise SpecError(f"{name!r}: moe.router_mlp={self.router_mlp} must be >= 0 (0: a linear router)")
        if self.latent < 0:
            raise SpecError(f"{name!r}: moe.latent={self.latent} must be >= 0 (0: experts at the model width)")
        if self.zero_experts < 0:
            raise SpecError(f"{name!r}: moe.zero_experts={self.zero_experts} must be >= 0 (identity experts)")


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek multi-head latent attention widths (per head unless named rank)."""

    q_lora_rank: int | None  # None: a plain q_proj D -> N*(nope+rope)
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    # DeepSeek Sparse Attention (DeepSeek-V3.2): the lightning indexer's heads and width, and the positions
    # each query attends (0: dense MLA)
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # A.X K2: no q_b_proj; q_gate_proj maps [norm(query latent), query latent] (2·L) to N·(H+R+J), the query
    # and a per-channel sigmoid gate on the attention output before o_proj
    q_gate: bool = False
    heads: int = 0  # query heads of the layers using these widths (0: the model's n_heads)
    k_rope_norm: bool = False  # Dots 3 Note: an RMSNorm (R weights) over the shared rotary key before RoPE

    def validate(self, name: str) -> None:
        if self.heads < 0:
            raise SpecError(f"{name!r}: mla.heads={self.heads} must be >= 0 (0: the model's n_heads)")
        if (self.index_topk or self.q_gate) and self.q_lora_rank is None:
            what = "a sparse-attention indexer" if self.index_topk else "mla.q_gate"
            raise SpecError(f"{name!r}: {what} needs mla.q_lora_rank (it reads the query latent)")
        if self.q_lora_rank is not None:
            _positive(name, "mla.q_lora_rank", self.q_lora_rank)
        for f in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            _positive(name, f"mla.{f}", getattr(self, f))


@dataclass(frozen=True)
class EncoderSpec:
    """The encoder stack of an encoder-decoder model (parameter counts only).

    It shares attention and FFN widths with the decoder; decoder layers then carry cross-attention.
    """

    n_layers: int
    norms_per_layer: int = 2
    final_norm: bool = True
    embedding_norm: bool = False
    own_position_table: bool = False  # BART: encoder and decoder each have a learned table
    # TrOCR: the encoder is another model (a VisionEncoderDecoderModel's image encoder, not in this config): no
    # encoder pass here, the decoder owns the token table, cross-attention K/V read ``d_model``-wide outputs
    external: str = ""
    d_model: int = 0  # width of the encoder output the cross-attention K/V project (0: the decoder's)
    # Whisper: the source is audio, not tokens. Two convolutions of kernel 3 (the second of stride 2) turn the
    # 2·P frames of ``in_features`` mel bins into P positions, to which a fixed table of ``source_positions``
    # rows is added; the encoder has no token table (the decoder owns it), and the source is always that
    # window: P = ``source_positions`` (Whisper: 30 s = 1500 positions = 3000 frames).
    frontend: str = ""  # "" (token embedding) or "conv" (Whisper's)
    in_features: int = 0
    source_positions: int = 0
    # BigBird-Pegasus: block-sparse self-attention in blocks of ``block_size`` with ``random_blocks`` random
    # blocks per query block (ops/bigbird_sizes.py); 0: full attention
    block_size: int = 0
    random_blocks: int = 0


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
        n = self.name
        for f in ("n_layers", "d_model", "vocab_size", "n_heads", "n_kv_heads", "head_dim"):
            _positive(n, f, getattr(self, f))
        if self.d_ff < 0 or (self.d_ff == 0 and self._needs_dense_ffn()):
            raise SpecError(f"{n!r}: d_ff={self.d_ff} must be a positive integer (the FFN hidden width)")
        for f in ("v_head_dim", "window_kv_heads"):
            if getattr(self, f) is not None:
                _positive(n, f, getattr(self, f))
        if self.window_kv_heads and self.n_heads % self.window_kv_heads:
            raise SpecError(
                f"{n!r}: n_heads={self.n_heads} is not a multiple of window_kv_heads={self.window_kv_heads}"
            )
        if self.n_heads % self.n_kv_heads:
            raise SpecError(
                f"{n!r}: n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}; "
                "each KV head must serve a whole group of query heads"
            )
        if self.ffn not in ("mlp", "gated"):
            raise SpecError(f"{n!r}: ffn={self.ffn!r} must be 'mlp' or 'gated'")
        if self.norm not in ("layer", "rms", "layer_noparam", "rms_noparam"):
            raise SpecError(f"{n!r}: norm={self.norm!r} must be 'layer', 'rms', 'layer_noparam' or 'rms_noparam'")
        if self.attention == "mla":
            if self.mla is None:
                raise SpecError(f"{n!r}: attention='mla' needs the mla widths (kv_lora_rank, ...)")
            self.mla.validate(n)
        if self.window_mla is not None:
            if self.mla is None or self.window_mla.index_topk:
                raise SpecError(f"{n!r}: window_mla (the sliding layers' MLA widths) needs mla and has no indexer")
            self.window_mla.validate(n)
        for part in (self.moe, self.prophet):  # sub-specs with rules of their own
            if part is not None:
                part.validate(n)
        if self.attn_experts and (self.moe is None or self.n_heads != self.moe.top_k * self.n_kv_heads):
            raise SpecError(
                f"{n!r}: attention experts need a MoE spec whose top_k·n_kv_heads equals n_heads={self.n_heads}"
            )
        if len(self.layer_moe) != self.n_layers:
            raise SpecError(f"{n!r}: layer_moe has {len(self.layer_moe)} entries for {self.n_layers} layers")
        if any(self.layer_moe) and self.moe is None:
            raise SpecError(f"{n!r}: layer_moe marks MoE layers but no moe spec is given")
        if len(self.layer_windows) != self.n_layers:
            raise SpecError(f"{n!r}: layer_windows has {len(self.layer_windows)} entries for {self.n_layers} layers")
        for w in self.layer_windows:
            if w is not None and (not isinstance(w, int) or w <= 0):
                raise SpecError(f"{n!r}: sliding window {w!r} must be a positive integer or None")
        self._validate_indexer()
        if self.position == "learned" and not self.max_positions:
            raise SpecError(f"{n!r}: learned positions need max_positions (the table's rows)")
        if self.rotary_dim is not None and not (0 < self.rotary_dim <= self.head_dim):
            raise SpecError(f"{n!r}: rotary_dim={self.rotary_dim} must be in 1..head_dim={self.head_dim}")
        self._validate_recurrence()
        if self.attn_gate not in ("none", "head", "full"):
            raise SpecError(f"{n!r}: attn_gate={self.attn_gate!r} must be 'none', 'head' or 'full'")
        for f in ("norms_per_layer", "prefix_positions", "extra_token_rows", "segment_rows", "codebooks", "enc_proj"):
            if getattr(self, f) < 0:
                raise SpecError(f"{n!r}: {f}={getattr(self, f)} must be >= 0")
        self._validate_mixers()
        self._validate_layer_widths()
        self._validate_parts()

    def _validate_parts(self) -> None:
        """The optional parts' own rules (Inkling's layers, DeepSeek-V4's compression, Qwen4-Exp's)."""
        if self.inkling is not None:
            self.inkling.validate(self.name)
        if self.blt is not None:
            self.blt.validate(self.name)
        self._validate_compressed()
        self._validate_qwen4()

    def _validate_indexer(self) -> None:
        n = self.name
        if self.block_index is not None:
            if self.mla is not None:
                raise SpecError(f"{n!r}: block_index (block-sparse attention) is modelled for MHA/GQA, not MLA")
            self.block_index.validate(n, self.n_heads)
        first_dense = self.block_index is None and self.layer_indexer and not self.layer_indexer[0]
        if len(self.layer_indexer) != self.n_layers or first_dense:
            raise SpecError(
                f"{n!r}: layer_indexer has {len(self.layer_indexer)} entries for {self.n_layers} layers, and the "
                "first layer must run its own indexer (a later one can only reuse an earlier layer's top-k)"
            )

    def _validate_compressed(self) -> None:
        n, c = self.name, self.compressed
        if len(self.layer_compress) != self.n_layers or not set(self.layer_compress) <= {"", "csa", "hca"}:
            raise SpecError(f"{n!r}: layer_compress needs one of '', 'csa', 'hca' for each of {self.n_layers} layers")
        if any(self.layer_compress) and c is None:
            raise SpecError(f"{n!r}: compressed layers need the compressed spec (DeepSeek-V4's attention widths)")
        if self.mhc_streams < 0:
            raise SpecError(f"{n!r}: mhc_streams={self.mhc_streams} must be >= 0 (0: a plain residual)")
        if self.mhc_streams and (self.parallel_block or any(k != "attention" for k in self.layer_mixers)):
            raise SpecError(
                f"{n!r}: hyper-connection streams are modelled around attention layers in sequence "
                "only (no parallel block, no other mixer); set mhc_streams=0"
            )
        if c is not None:
            c.validate(n)
            if (self.n_heads * self.head_dim) % c.o_groups:
                raise SpecError(
                    f"{n!r}: n_heads·head_dim={self.n_heads * self.head_dim} is not a multiple of "
                    f"compressed.o_groups={c.o_groups}; each output group takes a whole share"
                )

    def _validate_layer_widths(self) -> None:
        n = self.name
        for f in ("full_head_dim", "full_kv_heads"):
            if getattr(self, f) is not None:
                _positive(n, f, getattr(self, f))
        if self.n_heads % (self.full_kv_heads or self.n_kv_heads):
            raise SpecError(f"{n!r}: n_heads={self.n_heads} is not a multiple of full_kv_heads={self.full_kv_heads}")
        if (self.per_layer_width > 0) != (self.per_layer_vocab > 0) or min(
            self.per_layer_width, self.per_layer_vocab
        ) < 0:
            raise SpecError(
                f"{n!r}: per_layer_width={self.per_layer_width} and per_layer_vocab={self.per_layer_vocab} must be "
                "both positive (per-layer embeddings) or both 0"
            )
        for f in ("layer_kv_shared", "layer_ffn_sparse"):
            if len(getattr(self, f)) != self.n_layers:
                raise SpecError(f"{n!r}: {f} has {len(getattr(self, f))} entries for {self.n_layers} layers")
        if self.layer_d_ff and (len(self.layer_d_ff) != self.n_layers or min(self.layer_d_ff) <= 0):
            raise SpecError(f"{n!r}: layer_d_ff={self.layer_d_ff} must give {self.n_layers} positive FFN widths")
        if self.vision is not None:
            self.vision.validate(n)
        if self.assistant is not None:  # every layer reads the target's cache (model/spec_assistant.py)
            self.assistant.validate(n, self.vocab_size)
            if not all(self.layer_kv_shared):
                raise SpecError(f"{n!r}: an assistant's layers all read the target's K/V (layer_kv_shared)")
        own = {w for w, shared in zip(self.layer_windows, self.layer_kv_shared, strict=True) if not shared}
        for i, (w, shared) in enumerate(zip(self.layer_windows, self.layer_kv_shared, strict=True)):
            if shared and self.assistant is None and (w not in own or self.layer_kv_shared.index(True) == 0):
                raise SpecError(f"{n!r}: layer {i} reuses K/V but no earlier layer of its window {w} computes them")
        if min(self.altup_inputs, self.laurel_rank) < 0 or self.altup_inputs == 1 or self.kv_shared_ffn_mult < 1:
            raise SpecError(
                f"{n!r}: altup_inputs={self.altup_inputs} (0 or >= 2), laurel_rank={self.laurel_rank} (>= 0) and "
                f"kv_shared_ffn_mult={self.kv_shared_ffn_mult} (>= 1) are out of range"
            )
        if self.norm_gate_rank < 0:
            raise SpecError(f"{n!r}: norm_gate_rank={self.norm_gate_rank} must be >= 0 (0: norms without a gate)")

    def mla_of(self, window: int | None) -> MLASpec | None:
        """The MLA widths of the layers of ``window``: ``window_mla`` for sliding layers when set, else ``mla``."""
        return self.window_mla if window is not None and self.window_mla is not None else self.mla

    def _validate_recurrence(self) -> None:
        """ZAYA's CCA kernels and HRM-Text's recurrence."""
        n, r = self.name, self.recurrence
        if self.cca_kernels is not None and (
            len(self.cca_kernels) != 2 or min(self.cca_kernels) < 1 or (self.n_kv_heads * self.head_dim) % 2
        ):
            raise SpecError(
                f"{n!r}: cca_kernels={self.cca_kernels!r} must be two kernel widths >= 1, and n_kv_heads·head_dim "
                "even (CCA splits each value head into a current and a delayed half)"
            )
        if r is None:
            return
        if len(r) != 2 or min(r) < 1 or self.n_layers % (r[0] * (r[1] + 1)) or len(set(self.layer_kinds())) > 1:
            raise SpecError(
                f"{n!r}: recurrence={r!r} needs two cycle counts >= 1 (H, L) and n_layers={self.n_layers} a multiple "
                "of H·(L+1) layer runs of one layer kind (HRM: two stacks of identical layers)"
            )

    def _validate_qwen4(self) -> None:
        for part in (self.hyper, self.qsa, self.ngram):
            if part is not None:
                part.validate(self.name)
        ple = any(k.startswith("ple+") for k in self.layer_mixers)
        if ple and (self.ngram is None or self.hyper is None):
            raise SpecError(
                f"{self.name!r}: 'ple+' layers need the ngram spec and hyper-connections (hyper): the n-gram "
                "embeddings feed the residual streams"
            )

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

    def _validate_mixers(self) -> None:
        n = self.name
        if len(self.layer_mixers) != self.n_layers:
            raise SpecError(f"{n!r}: layer_mixers has {len(self.layer_mixers)} entries for {self.n_layers} layers")
        kinds = {k.split("+")[-1] for k in self.layer_mixers} - {"attention", "none", "xattn"}
        if kinds and (self.mixer is None or kinds != {self.mixer.kind}):
            raise SpecError(f"{n!r}: layer_mixers names {sorted(kinds)} but the mixer spec is {self.mixer!r}")
        if self.mixer is not None:
            self.mixer.validate(n)
        if any(k.startswith("shared+") for k in self.layer_mixers) and self.shared_block is None:
            raise SpecError(f"{n!r}: 'shared+' layers need the shared_block spec (the shared transformer block)")
        if self.shared_block is not None:
            self.shared_block.validate(n)

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
