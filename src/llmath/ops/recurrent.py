"""Short-convolution and recurrent sequence mixers: LFM2's gated short conv (``shortconv``), Griffin's
RG-LRU (``rglru``), RWKV-4's time and channel mix (``rwkv``) and xLSTM's mLSTM (``mlstm``).

Each kind is a row of :data:`KINDS` (registered into :data:`llmath.ops.mixers.KINDS`), each step a small
function declaring its operators through the block's :class:`~llmath.ops.core.Site`, with the widths of
the spec's :class:`~llmath.model.spec.MixerSpec`. Their fixed-size per-sequence state (conv windows,
recurrent states) is carried as ``kv_write`` / ``kv_read`` terms on the monomial ``B``, as
:mod:`llmath.ops.mixers` states.

Executions: ``eager`` is what transformers' torch code runs (5.23, its fallback kernels where a fused one
is optional); ``flash`` is what the fused serving kernels run, each step naming its source.
"""

from __future__ import annotations

from collections.abc import Callable

from llmath.model.spec import MixerSpec
from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, SOFTCAP_FLOPS, Site
from llmath.ops.ffn import residual


def mixer_of(site: Site) -> MixerSpec:
    """The spec's mixer (mixer steps here, in ops/mixers.py and in ops/linear_attn.py run on a spec with one)."""
    m = site.spec.mixer
    if m is None:  # pragma: no cover - mixer steps are only called for specs with a mixer
        raise AssertionError(site.spec.name)
    return m


def _state(site: Site, elements: int, sym: str) -> dict:
    """A fixed-size per-sequence state: written by every pass, read by a decode step and by a prefill that
    continues a cached prefix (monomial ``BP``, as :mod:`llmath.ops.mixers` states)."""
    decode = site.b.stage == "decode"
    return dict(kv_write=[(elements, "B", sym)], kv_read=[(elements, "B" if decode else "BP", sym)])


# ---- shortconv (LFM2) -------------------------------------------------------------------------------


def sc_in_proj(site: Site) -> None:
    m = mixer_of(site)
    site.linear("in_proj", "BTD,DI->BTI", site.spec.d_model, 3 * m.d_inner, bias=m.proj_bias, pkey="mixer.in_proj",
                sym_out="3·I")  # fmt: skip


def sc_conv(site: Site) -> None:
    """y = C ⊙ conv(B ⊙ x): a depthwise causal conv of width C over I channels between two gates.

    eager (``Lfm2ShortConv`` with the torch fallback of ``causal_conv1d_fn``, 5.23): ``F.conv1d`` with
    padding C − 1 over the T new positions (T + C − 1 outputs, cut to T); a decode step convolves the C
    cached inputs and the new one (2 outputs). Its cache holds C inputs per channel.
    flash (vLLM's ``ShortConv`` layer on ``causal_conv1d_fn`` / ``causal_conv1d_update``,
    vllm/model_executor/layers/mamba/short_conv.py): the T outputs only; its state holds C − 1 inputs.
    """
    m, eager, decode = mixer_of(site), site.b.attention == "eager", site.b.stage == "decode"
    I, C = m.d_inner, m.d_conv
    flops = [(2 * I * C, "BT", "2·I·C")]
    if eager:
        flops.append((2 * I * C * (1 if decode else C - 1), "B", "2·I·C" if decode else "2·I·C·(C−1)"))
    bias = I if m.conv_bias else 0
    site.op(
        "conv", "matmul", "BTI,IC->BTI",
        params=[("mixer.conv.weight", I * C), ("mixer.conv.bias", bias)],
        flops=flops, vflops=[(2 * I + bias, "BT", "2·I")],
        weight=[(I * C + bias, "1", "I·C")], act_in=[(3 * I, "BT", "3·I")], act_out=[(I, "BT", "I")],
        **_state(site, (C - 1) * I, "(C−1)·I"),
    )  # fmt: skip


def out_proj(site: Site) -> None:
    m = mixer_of(site)
    site.linear("out_proj", "BTI,ID->BTD", m.d_inner, site.spec.d_model, bias=m.proj_bias, pkey="mixer.out_proj",
                sym_in="I", sym_out="D")  # fmt: skip


# ---- rglru (Griffin / RecurrentGemma) -----------------------------------------------------------------


def rg_in_proj(site: Site) -> None:
    """``linear_y`` (the gate branch, GeLU) and ``linear_x`` (the recurrent branch), D -> I each, with biases."""
    m = mixer_of(site)
    site.linear("in_proj", "BTD,DI->BTI", site.spec.d_model, 2 * m.d_inner, bias=True, pkey="mixer.in_proj",
                sym_out="2·I")  # fmt: skip
    site.vector("gate_act", "BTI->BTI", ACT_FLOPS, m.d_inner, "BT", "I")


def rg_conv(site: Site) -> None:
    """Depthwise causal conv of width C over I channels, with bias; its state is the last C − 1 inputs.

    eager (``RecurrentGemmaRecurrentBlock``, 5.23): a prefill runs ``nn.Conv1d`` with padding C − 1
    (T + C − 1 outputs, cut to T); a decode step multiplies the C-wide window by the weight and sums it
    elementwise (vector FLOPs, no conv kernel). flash: the T outputs, as a conv kernel (Botev et al.
    2024, arXiv:2404.07839, RecurrentGemma's reference implementation keeps the same C − 1 inputs).
    """
    m, eager, decode = mixer_of(site), site.b.attention == "eager", site.b.stage == "decode"
    I, C = m.d_inner, m.d_conv
    flops, vflops = [(2 * I * C, "BT", "2·I·C")], [(I, "BT", "I")]
    if eager and decode:
        flops, vflops = [], [(2 * I * C + I, "BT", "2·I·C + I")]
    elif eager:
        flops.append((2 * I * C * (C - 1), "B", "2·I·C·(C−1)"))
    site.op(
        "conv", "matmul", "BTI,IC->BTI", params=[("mixer.conv.weight", I * C), ("mixer.conv.bias", I)],
        flops=flops, vflops=vflops, weight=[(I * C + I, "1", "I·C + I")], act_in=[(I, "BT", "I")],
        act_out=[(I, "BT", "I")], **_state(site, (C - 1) * I, "(C−1)·I"),
    )  # fmt: skip


def rg_gates(site: Site) -> None:
    """The RG-LRU's input and recurrence gates: block-diagonal linears (H blocks of I/H × I/H, with
    biases) run as a batched matmul per block (``torch.baddbmm``), then sigmoids."""
    m = mixer_of(site)
    I, H = m.d_inner, m.n_heads
    n = 2 * (I * I // H + I)
    site.op(
        "gates", "matmul", "BTI,HII->BTI", params=[("mixer.gates", n)],
        flops=[(4 * I * I // H, "BT", "4·I²/H")], vflops=[(2 * I + 2 * ACT_FLOPS * I, "BT", "2·I + 8·I")],
        weight=[(n, "1", "2·(I²/H + I)")], act_in=[(I, "BT", "I")], act_out=[(2 * I, "BT", "2·I")],
    )  # fmt: skip


def rg_scan(site: Site) -> None:
    """The RG-LRU recurrence h = a ⊙ h + √(1 − a²) ⊙ (i ⊙ x) with a = exp(−8·r·softplus(Λ)) (De et al.
    2024, arXiv:2402.19427, section 2.4), then the product with the gate branch; state: I per sequence.
    Per token and channel: softplus 3, a and a² 4, the root 3, the input gate 1, the update 2, the gate 1."""
    m = mixer_of(site)
    I = m.d_inner
    site.op(
        "scan", "vector", "BTI,BTI->BTI", params=[("mixer.recurrent_param", I)],
        vflops=[(14 * I, "BT", "14·I")], weight=[(I, "1", "I")], act_in=[(4 * I, "BT", "4·I")],
        act_out=[(I, "BT", "I")], **_state(site, I, "I"),
    )  # fmt: skip


def rg_out_proj(site: Site) -> None:
    m = mixer_of(site)
    site.linear("out_proj", "BTI,ID->BTD", m.d_inner, site.spec.d_model, bias=True, pkey="mixer.out_proj",
                sym_in="I", sym_out="D")  # fmt: skip


# ---- rwkv (RWKV-4) ------------------------------------------------------------------------------------


def rwkv_shift(site: Site, n: int, pkey: str) -> None:
    """Token shift: ``n`` interpolations between each token and the previous one (3 FLOPs per element),
    with their mixing vectors; the state is the last token's input (D per sequence)."""
    D = site.spec.d_model
    site.op(
        "time_shift", "vector", "BTD,BTD->BTD", params=[(pkey, n * D)], vflops=[(3 * n * D, "BT", f"{3 * n}·D")],
        weight=[(n * D, "1", f"{n}·D")], act_in=[(D, "BT", "D")], act_out=[(n * D, "BT", f"{n}·D")],
        **_state(site, D, "D"),
    )  # fmt: skip


def rwkv_time_mix(site: Site) -> None:
    """RWKV-4's time mix (Peng et al. 2023, arXiv:2305.13048, section 3): token shift, key, value and
    receptance D -> A, the WKV recurrence, σ(r) ⊙ wkv, output A -> D."""
    m, D = mixer_of(site), site.spec.d_model
    rwkv_shift(site, 3, "mixer.time_mix")
    site.linear("key_value_receptance", "BTD,DA->BTA", D, 3 * m.d_inner, bias=False, pkey="mixer.kvr",
                sym_out="3·I")  # fmt: skip
    rwkv_wkv(site)
    site.linear("output", "BTI,ID->BTD", m.d_inner, D, bias=False, pkey="mixer.output", sym_in="I", sym_out="D")
    residual(site.b, "residual.time_mix", site.count, site.lk)


def rwkv_wkv(site: Site) -> None:
    """The WKV recurrence per channel with its decay w and bonus u (``time_decay``, ``time_first``), kept
    as the numerator, denominator and running maximum (3·I per sequence); then σ(r) ⊙ wkv.

    eager (``rwkv_linear_attention_cpu``, transformers 5.23; its CUDA kernel only loads on a GPU): a
    Python loop over the tokens that reads and writes the three state vectors each step (3·I in and out
    per token). flash (the WKV CUDA kernel, ``kernels/rwkv/wkv_cuda.cu`` of transformers, from
    BlinkDL/RWKV-LM): one thread per channel keeps the state in registers; k and v are read once, wkv
    written once. Per token and channel: 2 maxima, 4 exps, 6 multiply-adds, 1 divide, 2 adds; σ(r)·wkv 5.
    """
    m, eager = mixer_of(site), site.b.attention == "eager"
    I = m.d_inner
    ins, outs = [(3 * I, "BT", "3·I")], [(I, "BT", "I")]
    if eager:
        ins.append((3 * I, "BT", "3·I"))
        outs.append((3 * I, "BT", "3·I"))
    site.op(
        "wkv", "vector", "BTI,BTI->BTI", params=[("mixer.time_decay", I), ("mixer.time_first", I)],
        vflops=[(20 * I, "BT", "20·I")], weight=[(2 * I, "1", "2·I")], act_in=ins, act_out=outs,
        **_state(site, 3 * I, "3·I"),
    )  # fmt: skip


def rwkv_channel_mix(site: Site) -> None:
    """RWKV-4's channel mix, after its own norm (``ln2``): token shift, key D -> F, relu², value F -> D,
    receptance D -> D, σ(r) ⊙ value. Its operators count as the FFN; the residual after it closes the layer."""
    m, D = mixer_of(site), site.spec.d_model
    site.b.norm("norm.ffn_in", D, count=site.count, pkey="norm.layers", layer_kind=site.lk)
    ffn = Site(site.b, site.count, site.lk, "ffn", "ffn", site.sizes)
    rwkv_shift(ffn, 2, "ffn.time_mix")
    ffn.linear("key", "BTD,DF->BTF", D, m.d_ff, bias=False, pkey="ffn.key", sym_out="F")
    ffn.vector("relu_sq", "BTF->BTF", 2, m.d_ff, "BT", "F")
    ffn.linear("value", "BTF,FD->BTD", m.d_ff, D, bias=False, pkey="ffn.value", sym_in="F", sym_out="D")
    ffn.linear("receptance", "BTD,DD->BTD", D, D, bias=False, pkey="ffn.receptance", sym_out="D")
    ffn.vector("gate", "BTD->BTD", ACT_FLOPS + 1, D, "BT", "D")


# ---- mlstm (xLSTM) ------------------------------------------------------------------------------------


def ml_proj(site: Site) -> None:
    """q, k (K each), v and the output gate (I each) from D, and the input and forget gates (H each, with
    biases, soft-capped)."""
    m, D = mixer_of(site), site.spec.d_model
    K, I, H = m.d_key, m.d_inner, m.n_heads
    site.linear("qkvo", "BTD,DI->BTI", D, 2 * K + 2 * I, bias=m.proj_bias, pkey="mixer.qkvo", sym_out="(2·K+2·I)")
    site.linear("if_gates", "BTD,DH->BTH", D, 2 * H, bias=True, pkey="mixer.if_gates", sym_out="2·H")
    site.vector("gate_softcap", "BTH->BTH", SOFTCAP_FLOPS, 2 * H, "BT", "2·H")


def ml_cell(site: Site) -> None:
    """The mLSTM cell (Beck et al. 2024, arXiv:2405.04517, section 2.3): per head a K/H × I/H matrix
    memory C, a normaliser n (K/H) and a stabiliser m (1); h = C·q / max(|n·q|, e^−m).

    eager (transformers 5.23's native kernels, as ``xLSTMBackend`` runs them for inference): the whole
    chunks of Q = ``chunk_size`` tokens go through ``mlstm_chunkwise_native_autograd`` (per chunk and
    head: the K/H × I/H state update kᵀv, q·Kᵀ and the gated scores times v over the full Q × Q block,
    q times the chunk's start state and its normaliser), the T mod Q tokens after them (and a decode
    step) through the per-token recurrent step (k·vᵀ outer product, q·C, q·n).
    flash (the TFLA chunkwise kernels of NX-AI/mlstm_kernels, Beck et al. 2025, arXiv:2503.14376, which
    xLSTM-7b's config selects): per token the state update and q·C (4·K·I/H) and q·n (2·K), within each
    chunk the causal pairs only (2·(K + I) per pair); a decode step is the recurrent step.
    """
    m, eager, decode = mixer_of(site), site.b.attention == "eager", site.b.stage == "decode"
    K, I, H, Q = m.d_key, m.d_inner, m.n_heads, m.chunk_size
    step = 4 * K * I // H + 2 * K
    if decode:
        flops = [(step, "BT", "4·K·I/H + 2·K")]
    elif eager:
        chunk = 2 * Q * Q * (K + I) + Q * step
        flops = [(step, f"R:{Q}", "4·K·I/H + 2·K"), (chunk, f"F:{Q}", "2·Q²·(K+I) + Q·(4·K·I/H + 2·K)")]
    else:
        flops = [(step, "BT", "4·K·I/H + 2·K"), (2 * (K + I), f"X:{Q}", "2·(K + I)")]
    state = K * I // H + K + H
    site.op(
        "cell", "matmul", "BTHK,BTHK,BTHI->BTHI", flops=flops, vflops=[(12 * H + 2 * I, "BT", "12·H + 2·I")],
        act_in=[(2 * K + I + 2 * H, "BT", "2·K + I + 2·H")], act_out=[(I, "BT", "I")],
        **_state(site, state, "K·I/H + K + H"),
    )  # fmt: skip


def ml_out(site: Site) -> None:
    """Per-head LayerNorm of h (weight over I), σ(o) ⊙ it, ``out_proj`` I -> D."""
    m = mixer_of(site)
    I = m.d_inner
    w = I * (2 if m.proj_bias else 1)
    site.vector("norm", "BTI->BTI", NORM_FLOPS["layer"], I, "BT", "I", component="norm",
                params=[("norm.mixer", w)], weight=[(w, "1", "I")])  # fmt: skip
    site.vector("out_gate", "BTI->BTI", ACT_FLOPS + 1, I, "BT", "I")
    site.linear("out_proj", "BTI,ID->BTD", I, site.spec.d_model, bias=m.proj_bias, pkey="mixer.out_proj",
                sym_in="I", sym_out="D")  # fmt: skip


Step = Callable[[Site], None]
KINDS: dict[str, tuple[Step, ...]] = {
    "shortconv": (sc_in_proj, sc_conv, out_proj),
    "rglru": (rg_in_proj, rg_conv, rg_gates, rg_scan, rg_out_proj),
    "rwkv": (rwkv_time_mix, rwkv_channel_mix),
    "mlstm": (ml_proj, ml_cell, ml_out),
}


def sizes(m: MixerSpec, d_model: int) -> dict[str, int]:
    """The letters of a recurrent kind's signatures."""
    out = dict(D=d_model, I=m.d_inner, C=m.d_conv)
    if m.n_heads:
        out["H"] = m.n_heads
    if m.d_ff:
        out["F"] = m.d_ff
    if m.d_key:
        out.update(K=m.d_key, Q=m.chunk_size)
    return out


def transformers_extra_state(m: MixerSpec, layers: int) -> int:
    """Elements per sequence transformers' cache holds beyond the serving kernels' state, for ``layers``
    layers of kind ``m``: LFM2's conv cache keeps C inputs per channel where ``causal_conv1d`` keeps C − 1.
    (RWKV's five state vectors are D wide in transformers, which runs only attention_hidden_size = D.)"""
    return m.d_inner * layers if m.kind == "shortconv" else 0
