"""Mixture-of-experts blocks: router, routed experts (expected experts hit), shared experts."""

from __future__ import annotations

from dataclasses import replace

from llmath.model.spec import ModelSpec
from llmath.model.spec_moe import MoESpec
from llmath.ops.core import ACT_FLOPS, NORM_FLOPS, ROUTER_FLOPS, Builder, Op, Site, Term
from llmath.ops.ffn import ffn_block
from llmath.ops.launches import launched
from llmath.ops.split import Split


def _moe(spec: ModelSpec) -> MoESpec:
    if spec.moe is None:  # pragma: no cover - the assembly builds MoE blocks for MoE layers only
        raise AssertionError(f"{spec.name}: a MoE block without a MoE spec")
    return spec.moe


def router(site: Site, pkey: str = "moe.router") -> None:
    """The router matmul and its softmax/top-k. DeepSeek-V3's e_score_correction_bias is a buffer in
    transformers, not a parameter: not counted. ``pkey``: another router over the same experts' count
    (JetMoE's attention experts). LongCat-Flash's router scores its zero-computation experts too (E + Z)."""
    m, D = _moe(site.spec), site.spec.d_model
    E, k = m.n_experts + (m.zero_experts if pkey == "moe.router" else 0), m.top_k
    if m.router_mlp and pkey == "moe.router":
        E = router_mlp(site)
    else:
        site.linear("router", "BTD,DE->BTE", D, E, bias=m.router_bias, pkey=pkey, sym_out="E", split=Split.REPLICATED)
    if (
        m.router_score_bias and pkey == "moe.router"
    ):  # ERNIE-4.5 adds a learned per-expert bias to the scores before top-k
        site.op("score_bias", "vector", "BTE->BTE", sizes=dict(E=E), params=[("moe.router.score_bias", E)],
                vflops=[(E, "BT", "E")], weight=[(E, "1", "E")], split=Split.REPLICATED)  # fmt: skip
    site.op("topk", "vector", "BTE->BTk", sizes=dict(E=E), vflops=[(ROUTER_FLOPS * E, "BT", "5·E")],
            act_in=[(E, "BT", "E")], act_out=[(2 * k, "BT", "2·k")], split=Split.REPLICATED)  # fmt: skip
    launched(site.b, "topk_with_token_sort")


def router_mlp(site: Site) -> int:
    """ZAYA's router (modeling_zaya.py ZayaRouter, ZayaRouterMLP): ``down_proj`` D -> R with bias (plus the
    previous layer's R-wide router state times a learned vector: :func:`router_state_carry`), an RMSNorm over R,
    two R x R layers with bias each followed by GELU, ``out_proj`` R -> E + 1 (the last class skips the
    experts). Returns the classes scored, E + 1."""
    m, D = _moe(site.spec), site.spec.d_model
    R, E = m.router_mlp, m.n_experts + 1
    sizes = dict(D=D, R=R, E=E)
    site.linear(
        "router_down",
        "BTD,DR->BTR",
        D,
        R,
        bias=True,
        pkey="moe.router.down",
        sym_out="R",
        sizes=sizes,
        split=Split.REPLICATED,
    )
    site.norm("router_norm", R, pkey="norm.router", sym="R", split=Split.REPLICATED)
    for fc in ("fc1", "fc2"):
        site.linear(f"router_{fc}", "BTR,RS->BTS", R, R, bias=True, pkey=f"moe.router.{fc}", sym_in="R",
                    sym_out="R", sizes=sizes, split=Split.REPLICATED)  # fmt: skip
        site.vector(f"router_{fc}_gelu", "BTR->BTR", ACT_FLOPS, R, "BT", "R", sizes=sizes, split=Split.REPLICATED)
    site.linear("router_out", "BTR,RE->BTE", R, E, bias=False, pkey="moe.router.out", sym_in="R", sym_out="(E+1)",
                sizes=sizes, split=Split.REPLICATED)  # fmt: skip
    return E


def router_state_carry(b: Builder) -> None:
    """ZAYA: every MoE layer's router but the first adds the previous layer's router state (width R) times a
    learned vector of width R (``router_states_scale``, absent from layer 0): R parameters and 2·R FLOPs per
    token in each of those layers."""
    m, n = b.spec.moe, sum(b.spec.layer_moe) - 1
    if m is None or not m.router_mlp or n < 1:
        return
    R = m.router_mlp
    b.add("moe.router_state", "moe", "vector", "BTR,R->BTR", dict(R=R), n, [("moe.router.state_scale", R)],
          vflops=[(2 * R, "BT", "2·R")], weight=[(R, "1", "R")], act_in=[(2 * R, "BT", "2·R")],
          act_out=[(R, "BT", "R")], split=Split.REPLICATED)  # fmt: skip


_ZERO_KEYS = (".gate.weight", ".up.weight")  # LongCat-Flash allocates these for its zero experts too


def routed_experts(site: Site) -> None:
    """An FFN run by top-k × tokens. Weight operands of all E experts; bytes: the experts actually hit.

    Llama-4 (``dense_eager``) under ``eager``: transformers' Llama4TextExperts runs every expert on every
    token (bmm over all E, the router's sigmoid scores zero the others), so E × tokens and all E experts'
    weights; serving kernels (``flash``, the default) run the top-k only, as for any MoE.

    LongCat-Flash's ``zero_experts``: transformers 5.23 allocates their gate_up rows (LongcatFlashExperts
    gate_up_proj has E + Z experts, down_proj E), so under ``eager`` they count as parameters; vLLM's
    ``LongcatMoe`` (vllm/model_executor/models/longcat_flash.py) builds its FusedMoE with the E real experts only
    (the router alone has E + Z outputs), so the served form (``flash``, the default) holds no weights for them. A
    token routed to one costs no matmul (an identity). How many of a token's top-k are real depends on the
    routing; llmath charges all top-k as real (the most eager executes, and what it executes when no zero expert
    is picked). Served, a token activates fewer: 18.6B to 31.3B parameters, 27B on average, by the LongCat-Flash-
    Chat model card (huggingface.co/meituan-longcat/LongCat-Flash-Chat), so llmath's routed FLOPs are an upper
    bound there.
    """
    b, m = site.b, _moe(site.spec)
    E, k = m.n_experts, m.top_k
    every = m.dense_eager and b.attention == "eager"
    latent_projection(site, "latent_in")
    before = len(b.ops)
    ffn_block(b, m.d_ff_expert, site.count, site.lk, "moe.experts", "moe.experts", "moe", bias=m.expert_bias,
              weight_read=None if every else "U:moe", mult=E if every else k,
              io=(m.latent, "L") if m.latent else None, experts=True)  # fmt: skip
    for i in range(before, len(b.ops)):
        op = b.ops[i]
        zero = m.zero_experts if b.attention == "eager" else 0  # transformers allocates them; vLLM does not
        params = tuple((key, n * (E + zero if key.endswith(_ZERO_KEYS) else E)) for key, n in op.params)
        b.ops[i] = replace(op, sizes=op.sizes + (("E", E), ("k", k)), params=params)
    latent_projection(site, "latent_out")


def latent_projection(site: Site, name: str) -> None:
    """Nemotron-3 Super/Ultra's latent MoE (``moe_latent_size`` L; modeling_nemotron_h.py NemotronHMoE): every
    token's D-wide input goes through ``fc1_latent_proj`` (D -> L) before the routed experts, which work at width
    L, and their sum through ``fc2_latent_proj`` (L -> D) after; both with the config's ``mlp_bias``. The router
    and the shared expert read the D-wide input."""
    m, D = _moe(site.spec), site.spec.d_model
    if not m.latent:
        return
    L, sizes = m.latent, dict(D=D, L=m.latent)
    if name == "latent_in":
        site.linear(name, "BTD,DL->BTL", D, L, bias=site.spec.ffn_bias, pkey="moe.latent.in", sym_out="L", sizes=sizes,
                    split=Split.REPLICATED)  # fmt: skip
    else:
        site.linear(name, "BTL,LD->BTD", L, D, bias=site.spec.ffn_bias, pkey="moe.latent.out", sym_in="L",
                    sizes=sizes, split=Split.REPLICATED)  # fmt: skip


def shared_experts(site: Site) -> None:
    """Always-on shared experts (DeepSeek, Qwen-MoE), with Qwen's sigmoid gate when present."""
    m, D = _moe(site.spec), site.spec.d_model
    if not m.d_ff_shared:
        return
    ffn_block(
        site.b, m.d_ff_shared, site.count, site.lk, "moe.shared", "moe.shared", "moe", bias=m.shared_bias, letter="F"
    )
    if m.shared_gate:
        site.linear("shared_gate", "BTD,D1->BT1", D, 1, bias=False, pkey="moe.shared_gate", sizes=dict(D=D),
                    sym_out="1", split=Split.REPLICATED)  # fmt: skip


def output_norm(site: Site) -> None:
    """A.X K1: a norm over the block's output (routed + shared), weights under the layer norms; JetMoE: a
    bias vector added to the block's output."""
    m, D = _moe(site.spec), site.spec.d_model
    if m.output_norm:
        site.norm("output_norm", D, pkey="norm.layers")
    if m.output_bias:
        site.vector(
            "output_bias",
            "BTD->BTD",
            1,
            D,
            "BT",
            "D",
            params=[("moe.bias", D)],
            weight=[(D, "1", "D")],
            split=Split.REPLICATED,
        )


def as_experts(op: Op, m: MoESpec, per_expert: int) -> Op:
    """``op`` with its weight made one of ``m.n_experts`` experts of which each token uses ``m.top_k`` (JetMoE's
    attention experts): the parameters of all E; weight bytes of the experts hit (``U:moe``) plus any bias."""
    params = tuple((k, m.n_experts * per_expert if k.endswith(".weight") else n) for k, n in op.params)
    bias = sum(n for k, n in op.params if not k.endswith(".weight"))
    w = (Term(per_expert, "U:moe", f"{per_expert}"),) + ((Term(bias, "1", f"{bias}"),) if bias else ())
    return replace(op, params=params, costs=tuple((c, w if c == "weight" else ts) for c, ts in op.costs))


def moe_block(b: Builder, count: int, lk: str) -> None:
    site = Site(b, count, lk, "moe", "moe", dict(D=b.spec.d_model, E=_moe(b.spec).n_experts))
    for step in (router, routed_experts, shared_experts, output_norm):
        step(site)


def moe_beside_ffn(b: Builder, count: int, lk: str) -> None:
    """Gemma 4's MoE block beside the dense FFN (``enable_moe_block``, modeling_gemma4.py Gemma4TextDecoderLayer,
    Gemma4TextRouter): the FFN's output normed; the router on the layer's pre-FFN residual (a norm without
    weight, × its learned ``scale`` (D) and 1/√D, D -> E, softmax top-k, × ``per_expert_scale`` (E)); the experts
    on that residual normed; their output normed; the two summed (before the layer's post-FFN norm)."""
    s, D = b.spec, b.spec.d_model
    E = _moe(s).n_experts
    site = Site(b, count, lk, "moe", "moe", dict(D=D, E=E))
    site.norm("ffn_out_norm", D, pkey="norm.layers")
    site.vector("router_scale", "BTD->BTD", 2 + NORM_FLOPS[s.norm], D, "BT", "D", params=[("moe.router.scale", D)],
                weight=[(D, "1", "D")], split=Split.REPLICATED)  # fmt: skip
    router(site)
    site.op("expert_scale", "vector", "E", sizes=dict(E=E), params=[("moe.router.expert_scale", E)],
            vflops=[(_moe(s).top_k, "BT", "k")], weight=[(E, "1", "E")], split=Split.REPLICATED)  # fmt: skip
    site.norm("in_norm", D, pkey="norm.layers")
    routed_experts(site)
    site.norm("out_norm", D, pkey="norm.layers")
    site.vector("sum", "BTD,BTD->BTD", 1, D, "BT", "D", split=Split.REPLICATED)
