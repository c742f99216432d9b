"""DeepSeek-V4's attention: shared-KV MQA over a sliding window plus compressed KV entries (CSA / HCA).

What transformers 5.23 executes (modeling_deepseek_v4.py ``DeepseekV4Attention``), letters: D model, N heads,
H head width (key = value), L query rank, R rotary width, g output groups, O per-group output rank, W window,
m compression rate, I indexer heads, X indexer width, k the indexer's top-k:

* q = RMS(q_b(RMSNorm(q_a(x)))): D -> L -> N·H; one K=V head kv = RMSNorm(kv_proj(x)): D -> H, cached in a
  sliding window (transformers keeps W − 1 positions, and in a ``sliding_attention`` layer, whose cache
  class is the generic sliding one, a separate copy as values: 2·H per position);
* a compressor (``csa``: rate m = csa_rate; ``hca``: m = hca_rate): kv_proj and gate_proj D -> c·H
  (c = 2 for CSA's overlapping windows, 1 for HCA) for every token; each closed window of m positions is
  pooled (softmax of gate + position_bias over the window) into one entry of width H (RMSNorm, RoPE),
  appended to the cache. Positions of an unclosed window wait in a buffer (kv and gate, c·H each); CSA
  also keeps the last window's first halves (``overlap``, m·H each for kv and gate) once a window closed.
  After S positions a layer holds ⌊S/m⌋ entries, (S mod m) buffered positions and the overlap;
* CSA's lightning indexer: its own compressor at width X (kv/gate D -> 2·X, ⌊S/m⌋ keys of width X
  cached, buffer and overlap likewise), q_b L -> I·X from the query latent, weights_proj D -> I, scores
  Σ_h w_h·ReLU(q_h·k) against every entry, then the top k;
* eager attention (sinks as gpt-oss) over [window keys ; all compressed entries]: T × (min(S0, W − 1) + T
  + ⌊(S0+T)/m⌋) scores per head (monomials ``E:W`` + ``zE:m``), masked entries included;
* the output: inverse RoPE, o_a per group (N·H/g -> O, g groups: N·H·O weights), o_b g·O -> D.

``flash`` (the serving default) fuses the products over the causal pairs only: the window's, plus per
query the entries closed by then (``zP:m``), capped at the indexer's top-k on CSA layers; the indexer scores
the causal pairs. That is what vLLM runs (vllm/models/deepseek_v4/nvidia/flashmla.py at commit a5ebb5f6:
sparse MLA over the window's indices combined with the indexer's top-k on ratio-4 layers, and with every
compressed entry, "the full compressed region", on ratio-128 layers) and what transformers' own
``DeepseekV4Indexer`` states: each query attends only the k selected entries.
"""

from __future__ import annotations

from llmath.model.spec import CompressedSpec
from llmath.ops.core import NORM_FLOPS, ROTARY_FLOPS, ROUTER_FLOPS, SOFTMAX_FLOPS, Builder, Site, Window
from llmath.ops.kernel import Kernel
from llmath.ops.split import Split


def _c(site: Site) -> CompressedSpec:
    c = site.spec.compressed
    if c is None:  # pragma: no cover - the assembly sends compressed specs only
        raise AssertionError(site.spec.name)
    return c


def _rotary_width(site: Site) -> int:
    s = site.spec
    return s.rotary_dim or s.head_dim


def query_kv(site: Site) -> None:
    """The low-rank query (q_a, its norm, q_b, the unweighted per-head norm) and the shared K=V head."""
    s, c = site.spec, _c(site)
    D, N, H, L = s.d_model, s.n_heads, s.head_dim, c.q_lora_rank
    sizes = dict(site.sizes, L=L)
    site.linear(
        "q_a_proj",
        "BTD,DL->BTL",
        D,
        L,
        bias=False,
        pkey="attention.q_a",
        sizes=sizes,
        sym_out="L",
        split=Split.REPLICATED,
    )
    site.norm("q_a_norm", L, pkey="attention.q_a_norm", sym="L")
    site.linear("q_b_proj", "BTL,LNH->BTNH", L, N * H, bias=False, pkey="attention.q_b", sizes=sizes,
                sym_in="L", sym_out="N·H", split=Split.COLUMN)  # fmt: skip
    site.vector("q_b_norm", "BTNH->BTNH", NORM_FLOPS["rms_noparam"], N * H, "BT", "N·H", split=Split.SHARE)
    site.linear(
        "kv_proj",
        "BTD,DH->BTH",
        D,
        H,
        bias=False,
        pkey="attention.kv",
        sym_out="H",
        out="kv_write",
        split=Split.REPLICATED,
    )
    site.norm("kv_norm", H, pkey="attention.kv_norm", sym="H")
    R = _rotary_width(site)
    site.vector(
        "rotary", "BTNR->BTNR", ROTARY_FLOPS, (2 * N + 1) * R, "BT", "(2N+1)·R", split=Split.QK_HEADS
    )  # q, kv, output


def _state(site: Site, name: str, m: int, width: int, c: int, overlap: bool) -> None:
    """One compressor's cached state: the entries it emits (``zN``), the buffered positions' kv and gate
    (``zM``, c·width each) and CSA's overlap (m positions' first halves of kv and gate, once a window closed)."""
    terms = [(width, f"zN:{m}", "H"), (2 * c * width, f"zM:{m}", f"2·{c}·H")]
    if overlap:
        terms.append((2 * m * width, f"zO:{m}", "2·m·H"))
    site.op(f"{name}.state", "memory", "BH->BH", sizes=dict(site.sizes, m=m), kv_write=terms, split=Split.REPLICATED)


def compressor(site: Site, name: str, m: int, width: int, c: int, pkey: str) -> None:
    """kv and gate projections (D -> c·width) of every token, the softmax pooling of each closed window
    (position_bias m × c·width), the entries' RMSNorm and RoPE, and the cached state (:func:`_state`)."""
    D, cw = site.spec.d_model, c * width
    sizes = dict(site.sizes, C=cw, m=m)
    for proj in ("kv_proj", "gate_proj"):
        site.linear(f"{name}.{proj}", "BTD,DC->BTC", D, cw, bias=False, pkey=f"{pkey}.{proj}", sizes=sizes,
                    sym_out="C", split=Split.REPLICATED)  # fmt: skip
    site.op(
        f"{name}.pool", "vector", "BTC,mC->BTC", sizes=sizes, params=[(f"{pkey}.position_bias", m * cw)],
        vflops=[((SOFTMAX_FLOPS + 3) * cw, "BT", "8·C")], weight=[(m * cw, "1", "m·C")],
        act_in=[(2 * cw, "BT", "2·C")], act_out=[(width, f"zN:{m}", "H")], split=Split.REPLICATED
    )  # fmt: skip
    site.op(
        f"{name}.kv_norm", "vector", "BH->BH", sizes=sizes, params=[(f"{pkey}.kv_norm", width)],
        vflops=[((NORM_FLOPS["rms"] + ROTARY_FLOPS) * width, f"zN:{m}", "7·H")], weight=[(width, "1", "H")],
        act_in=[(width, f"zN:{m}", "H")], act_out=[(width, f"zN:{m}", "H")], split=Split.REPLICATED
    )  # fmt: skip
    _state(site, name, m, width, c, overlap=c == 2)


def indexer(site: Site, m: int) -> None:
    """CSA's lightning indexer: its compressor at width X, q_b from the query latent, per-head weights, the
    scores against the cached index keys (eager: every entry; flash: the causal pairs) and the top-k."""
    s, c = site.spec, _c(site)
    D, L, In, X, k = s.d_model, c.q_lora_rank, c.index_heads, c.index_head_dim, c.index_topk
    compressor(site, "indexer", m, X, 2, "attention.indexer")
    sizes = dict(site.sizes, L=L, I=In, X=X)
    site.linear("indexer.q_b_proj", "BTL,LIX->BTIX", L, In * X, bias=False, pkey="attention.indexer.q_b",
                sizes=sizes, sym_in="L", sym_out="I·X", split=Split.REPLICATED)  # fmt: skip
    site.linear("indexer.weights_proj", "BTD,DI->BTI", D, In, bias=False, pkey="attention.indexer.weights",
                sizes=sizes, sym_out="I", split=Split.REPLICATED)  # fmt: skip
    rect = f"zE:{m}" if site.b.attention == "eager" else f"zP:{m}"
    site.op("indexer.scores", "matmul", "BTIX,BSX->BTIS", sizes=sizes, flops=[(2 * In * X, rect, "2·I·X")],
            vflops=[(3 * In + ROUTER_FLOPS, rect, "3·I+5")], act_in=[(In * X + In, "BT", "I·(X+1)")],
            kv_read=[(X, f"zK:{m}", "X")], act_out=[(k, "BT", "k")], split=Split.REPLICATED)  # fmt: skip


def products(site: Site, w: int | None, m: int, cap: int | None) -> None:
    """Attention over the window and the compressed entries (one K=V head broadcast to the N heads)."""
    s = site.spec
    N, H, win = s.n_heads, s.head_dim, Window.of(w)
    if site.b.attention == "eager":
        e = [(2 * N * H, win.E, "2·N·H")] + ([(2 * N * H, f"zE:{m}", "2·N·H")] if m else [])
        site.op("scores", "matmul", "BTNH,BSH->BNTS", flops=e, act_in=[(N * H, "BT", "N·H")],
                kv_read=_reads(H, win.K, m, None), act_out=[(N, mono, "N") for _, mono, _ in e],
                split=Split.HEADS)  # fmt: skip
        site.op("softmax", "vector", "BNTS->BNTS", vflops=[(SOFTMAX_FLOPS * N, mono, "5·N") for _, mono, _ in e],
                act_in=[(N, mono, "N") for _, mono, _ in e], act_out=[(N, mono, "N") for _, mono, _ in e],
                split=Split.HEADS)  # fmt: skip
        site.op("context", "matmul", "BNTS,BSH->BTNH", flops=e, act_in=[(N, mono, "N") for _, mono, _ in e],
                act_out=[(N * H, "BT", "N·H")], split=Split.HEADS)  # fmt: skip
        return
    capped = f"zP:{m}:{cap}" if cap else f"zP:{m}"
    pairs = [(win.P, "")] + ([(capped, "")] if m else [])
    site.op("flash", "matmul", "BTNH,BSH->BTNH", flops=[(4 * N * H, p, "4·N·H") for p, _ in pairs],
            vflops=[(SOFTMAX_FLOPS * N, p, "5·N") for p, _ in pairs], act_in=[(N * H, "BT", "N·H")],
            kv_read=_reads(H, win.K, m, cap if site.b.stage == "decode" else None),
            act_out=[(N * H, "BT", "N·H")], split=Split.HEADS, kernel=Kernel.DENSE_ATTENTION)  # fmt: skip


def _reads(H: int, window_keys: str, m: int, cap: int | None) -> list[tuple[int, str, str]]:
    if not m:
        return [(H, window_keys, "H")]
    return [(H, window_keys, "H"), (H, f"zK:{m}" + (f":{cap}" if cap else ""), "H")]


def output(site: Site) -> None:
    """Sinks (one logit per head), o_a per group (g groups of N·H/g -> O) and o_b (g·O -> D)."""
    s, c = site.spec, _c(site)
    N, H, D, g, O = s.n_heads, s.head_dim, s.d_model, c.o_groups, c.o_lora_rank
    site.op("sinks", "vector", "N->N", params=[("attention.sinks", N)], weight=[(N, "1", "N")], split=Split.HEADS)
    sizes = dict(site.sizes, g=g, O=O)
    site.linear("o_a_proj", "BTgJ,gJO->BTgO", N * H, O, bias=False, pkey="attention.o_a", sizes=sizes,
                sym_in="N·H", sym_out="O", split=Split.SHARE)  # fmt: skip
    site.linear("o_b_proj", "BTgO,gOD->BTD", g * O, D, bias=False, pkey="attention.o_b", sizes=sizes,
                sym_in="g·O", sym_out="D", split=Split.ROW)  # fmt: skip


def compressed_attention(b: Builder, w: int | None, kind: str, count: int, lk: str) -> None:
    """One group of DeepSeek-V4 attention layers: ``kind`` "" (window only), "csa" or "hca"."""
    s, c = b.spec, b.spec.compressed
    if c is None:  # pragma: no cover - the assembly sends compressed specs only
        raise AssertionError(s.name)
    site = Site(b, count, lk, "attn", "attention", dict(D=s.d_model, N=s.n_heads, H=s.head_dim))
    query_kv(site)
    m = {"csa": c.csa_rate, "hca": c.hca_rate}.get(kind, 0)
    if m:
        compressor(site, "compressor", m, s.head_dim, 2 if kind == "csa" else 1, "attention.compressor")
    if kind == "csa":
        indexer(site, m)
    products(site, w, m, c.index_topk if kind == "csa" else None)
    output(site)
