"""The mixer parts of :class:`llmath.model.spec.ModelSpec`: a non-attention layer's mixer (state-space,
linear-attention, recurrent, short-conv: :class:`MixerSpec`) and Zamba's shared transformer block
(:class:`SharedBlockSpec`). Re-exported by :mod:`llmath.model.spec`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from llmath.errors import SpecError
from llmath.model.part_traits import LayerCollective
from llmath.model.spec_hyper import _positive

if TYPE_CHECKING:
    from llmath.model.spec import ModelSpec

LINEAR_ATTENTION_KINDS = ("gated_delta", "kda", "lightning")  # ops/linear_attn.py


@dataclass(frozen=True)
class MixerSpec:
    """A sequence mixer other than attention, for the layers :attr:`ModelSpec.layer_mixers` marks with ``kind``.

    ``mamba`` (Mamba-1 selective SSM, Gu & Dao 2023, arXiv:2312.00752): ``in_proj`` D -> 2·I (x and the
    gate z), a depthwise causal conv of width ``d_conv`` over I channels, ``x_proj`` I -> R + 2·N (the
    time step's rank-R input and the input-dependent B, C), ``dt_proj`` R -> I (with bias), the selective
    scan with a state of I × N per sequence, ``out_proj`` I -> D. Its per-sequence state is fixed in
    size: the conv window and the SSM state.

    ``mamba2`` (Mamba-2 / SSD, Dao & Gu 2024, arXiv:2405.21060): ``in_proj`` D -> 2·I + 2·G·N + H (the
    gate z, x, B and C of G groups, dt per head), the conv over x, B, C (I + 2·G·N channels), the SSD scan
    over H heads of width P (I = H·P) in chunks of ``chunk_size`` with a state of H × P × N per
    sequence, a gated RMSNorm over I, ``out_proj`` I -> D.

    ``shortconv`` (LFM2's gated short convolution, Liquid AI; ``Lfm2ShortConv`` in transformers):
    ``in_proj`` D -> 3·I (the gates B, C and x; I = D), y = C ⊙ conv(B ⊙ x) with a depthwise causal conv
    of width ``d_conv``, ``out_proj`` I -> D; biases when ``conv_bias``. Its state is the conv window.

    The recurrent kinds (``rglru``, ``rwkv``, ``mlstm``) are described with their operators in
    :mod:`llmath.ops.recurrent`; their widths use the fields below as that module states.


    Linear attention (:mod:`llmath.ops.linear_attn`) reads the same fields as heads: ``n_heads`` H value
    heads of width ``head_dim`` P (``d_inner`` I = H·P), ``n_groups`` G key heads of width ``d_state`` N
    (the state is H × N × P per sequence), a causal conv of width ``d_conv`` over q, k, v (I + 2·G·N
    channels; 0: none), chunks of ``chunk_size``. ``gated_delta`` (Gated DeltaNet, Yang et al. 2024,
    arXiv:2412.06464: Qwen3-Next, Qwen3.5, OLMo-Hybrid), ``kda`` (Kimi Delta Attention, arXiv:2510.26692:
    per-channel decay; Kimi-Linear, Ling hybrid; ``gate_rank`` R > 0: its forget and output gates are
    low-rank D -> R -> I pairs), ``lightning`` (MiniMax-01's lightning attention, arXiv:2501.08313:
    a data-independent per-head decay, N = P, no conv; ``chunk_size`` is its block).
    """

    kind: Literal["mamba", "mamba2", "shortconv", "rglru", "rwkv", "mlstm", "gated_delta", "kda", "lightning"]
    d_inner: int  # I
    d_state: int  # N
    d_conv: int  # conv kernel width
    dt_rank: int = 0  # R (mamba)
    n_heads: int = 0  # H (mamba2)
    head_dim: int = 0  # P (mamba2)
    n_groups: int = 1  # G: B and C shared by H / G heads each (mamba2)
    chunk_size: int = 256  # Q (mamba2)
    conv_bias: bool = True
    proj_bias: bool = False  # in_proj / out_proj biases
    inner_norms: bool = False  # Jamba: RMSNorms (with weights) over dt (R), B and C (N each) inside the mixer
    gated_norm: bool = True  # mamba2: RMSNorm (with weight) of y·silu(z); False: y·silu(z) only (Falcon-H1)
    out_bias: bool | None = None  # out_proj bias when it differs from proj_bias (Falcon-H1's projectors_bias)
    # Falcon-H1's µP multipliers of the in_proj outputs (z, x, B, C, dt), applied per channel every token
    multipliers: tuple[float, ...] = ()
    d_ff: int = 0  # rwkv: the channel mix's hidden width
    d_key: int = 0  # mlstm: the query / key width (I is the value width)
    gate_rank: int = 0  # kda: rank of the low-rank forget / output gate projections (0: full D -> I)

    @property
    def conv_channels(self) -> int:
        """Channels the causal conv runs over: x (mamba); x, B and C (mamba2); q, k and v (linear attention)."""
        if self.kind in LINEAR_ATTENTION_KINDS:
            return self.d_inner + 2 * self.n_groups * self.d_state if self.d_conv else 0
        return self.d_inner + (2 * self.n_groups * self.d_state if self.kind == "mamba2" else 0)

    def validate(self, name: str) -> None:
        if self.kind in LINEAR_ATTENTION_KINDS:
            self._validate_linear(name)
            return
        for f in _MIXER_SIZES[self.kind]:
            _positive(name, f"mixer.{f}", getattr(self, f))
        if self.kind == "mamba2" and self.n_heads * self.head_dim != self.d_inner:
            raise SpecError(
                f"{name!r}: mixer n_heads·head_dim = {self.n_heads}·{self.head_dim} must equal d_inner={self.d_inner}"
            )

    def _validate_linear(self, name: str) -> None:
        for f in ("d_inner", "d_state", "n_heads", "head_dim", "n_groups", "chunk_size"):
            _positive(name, f"mixer.{f}", getattr(self, f))
        if self.d_conv < 0 or self.gate_rank < 0:
            raise SpecError(f"{name!r}: mixer d_conv={self.d_conv}, gate_rank={self.gate_rank} must be >= 0")
        if self.n_heads * self.head_dim != self.d_inner or self.n_heads % self.n_groups:
            raise SpecError(
                f"{name!r}: linear attention needs n_heads·head_dim = d_inner and n_heads a multiple of the "
                f"key heads n_groups (got {self.n_heads}·{self.head_dim}, {self.d_inner}, {self.n_groups})"
            )


# the width fields each mixer kind needs (all positive)
_MIXER_SIZES = {
    "mamba": ("d_inner", "d_state", "d_conv", "dt_rank"),
    "mamba2": ("d_inner", "d_state", "d_conv", "n_heads", "head_dim", "n_groups", "chunk_size"),
    "shortconv": ("d_inner", "d_conv"),
    "rglru": ("d_inner", "d_conv", "n_heads"),
    "rwkv": ("d_inner", "d_ff"),
    "mlstm": ("d_inner", "d_key", "n_heads", "chunk_size"),
}


@dataclass(frozen=True)
class SharedBlockSpec:
    """Zamba / Zamba2 (arXiv:2405.16712, 2411.15242): a transformer block whose weights are shared by the
    layers :attr:`ModelSpec.layer_mixers` marks ``shared+<mixer kind>``, run before that layer's mixer.

    Its input is the hidden state concatenated with the token embeddings (``d_in`` = 2·D wide): a norm over
    ``d_in``, attention of :attr:`ModelSpec.n_heads` heads of :attr:`ModelSpec.head_dim` from ``d_in`` (its
    K/V cached per hybrid layer), o_proj to D, a norm, the gated MLP of :attr:`ModelSpec.d_ff`; then each
    hybrid layer's own D × D ``linear``, added to the mixer's input. ``n_blocks`` weight sets are used in
    turn (Zamba2's ``num_mem_blocks``); Zamba2 gives each hybrid layer its own LoRA adapters of rank
    ``adapter_rank`` on the MLP's gate/up projection and (``attention_adapters``) on q, k and v.
    """

    # parallel trait (model/traits.py): why pipeline stages are refused
    no_pp: ClassVar[str] = (
        "shared blocks are not pipeline-parallel in vLLM (Zamba2ForCausalLM does not implement SupportsPP, "
        "vllm/model_executor/models/zamba2.py)"
    )

    n_blocks: int
    d_in: int
    adapter_rank: int = 0
    attention_adapters: bool = False

    def tp_problem(self, spec: ModelSpec, tp: int) -> str | None:
        """Why vLLM would refuse ``tp``-way TP of the shared block, or None: vLLM implements Zamba2 only (no
        ``zamba.py``), and ``Zamba2LoRA``'s column-parallel A needs T | r (deploy/shard_shared.py)."""
        if not any(k.startswith("shared+") for k in spec.layer_mixers):
            return None
        if spec.mixer is not None and spec.mixer.kind != "mamba2":
            return (
                f"tp={tp}: Zamba (v1)'s shared blocks have no engine sharding rule (vLLM implements Zamba2 only, "
                "vllm/model_executor/models/zamba2.py); analyse it on one GPU"
            )
        if self.adapter_rank % tp:
            return f"tp={tp} must divide the shared block's LoRA rank {self.adapter_rank} (vLLM Zamba2LoRA)"
        return None

    def tp_collectives(self, spec: ModelSpec) -> tuple[LayerCollective, ...]:
        """Each hybrid layer (``shared+<kind>``) under TP, as vLLM's ``zamba2.py`` runs it: the block's o_proj and
        down all-reduce D each; each LoRA adapter's A (``gather_output=True``) all-gathers its r outputs per
        token: one for gate/up, three more (q, k, v) with attention adapters."""
        D = spec.d_model
        out = [
            LayerCollective("shared.attn.all_reduce", "all_reduce", "shared+", D, "D"),
            LayerCollective("shared.ffn.all_reduce", "all_reduce", "shared+", D, "D"),
        ]
        adapters = (1 if self.adapter_rank else 0) + (3 if self.attention_adapters else 0)
        if adapters:
            r = self.adapter_rank
            out.append(LayerCollective("shared.adapter.all_gather", "all_gather", "shared+", r, "r", adapters))
        return tuple(out)

    def validate(self, name: str) -> None:
        _positive(name, "shared_block.n_blocks", self.n_blocks)
        _positive(name, "shared_block.d_in", self.d_in)
        if self.adapter_rank < 0 or (self.attention_adapters and not self.adapter_rank):
            raise SpecError(f"{name!r}: shared_block.adapter_rank={self.adapter_rank} must be >= 0 (> 0 with adapters)")
