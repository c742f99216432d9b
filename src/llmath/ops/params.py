"""Parameter counts: a view over the operator list (sizes of the weight operands).

Tied weights are counted once (the LM head of a tied model owns no parameters). Active parameters per
token are the weights one token's forward pass uses: the total minus the routed experts it does not use
((E − k) experts per MoE layer), minus the rows of Qwen4-Exp's n-gram tables (BLT's hash tables) it does
not read, and, when
the embedding is not tied to the LM head, minus every token-embedding row but its own (a lookup reads one
row of the V × D table; a tied table is the LM head's weight, which every token uses whole). This is how
gpt-oss's authors count (model card, arXiv:2508.10925, Table 1: 5.13B active for gpt-oss-120b, 3.61B for
gpt-oss-20b).
A multimodal wrapper's counted towers (vision encoder, projector: ``towers``) are in ``by_component`` and
the total but not in the per-token counts (they run once per image, not per text token) nor in the
closed-form estimates' errors (which describe the language model).
``active_per_token_with_embedding`` keeps the whole table, the convention of e.g. Mistral's "12.9B
active" for Mixtral-8x7B (mistral.ai/news/mixtral-of-experts).
The closed-form rules of thumb are reported beside the exact count with their error (docs/estimates.md):
``12Ld²`` (four d×d attention matrices and two d×4d FFN matrices per layer), ``12Ld²+13Ld`` (plus the
biases and two LayerNorms per layer, d_ff = 4d) and ``12Ld²+13Ld+Vd`` (plus one embedding matrix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from llmath.errors import ConfigError
from llmath.model.dtypes import MODULES, Precision
from llmath.model.spec import ModelSpec
from llmath.ops import build_ops

MIN_STORED_BPP, MAX_STORED_BPP = 1 / 8, 8  # bytes per parameter a checkpoint can store: 1 bit … fp64


@dataclass(frozen=True)
class ParamReport:
    model: str
    total: int
    by_component: dict[str, int]
    per_layer: dict[str, int]  # layer kind -> parameters of one such layer
    layer_counts: dict[str, int]  # layer kind -> how many layers
    active_per_token: int
    estimates: dict[str, int]
    active_per_token_with_embedding: int = 0
    wrapper: str = ""  # the multimodal wrapper whose language model this counts
    towers_not_counted: tuple[str, ...] = ()  # its sub-configs llmath cannot count, not in these counts
    towers: dict[str, int] = field(default_factory=dict)  # counted towers (vision, projector, ...), in the total
    estimate_error: dict[str, float] = field(default_factory=dict)  # (estimate - exact) / exact

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "total": self.total,
            "by_component": self.by_component,
            "per_layer": self.per_layer,
            "layer_counts": self.layer_counts,
            "active_per_token": self.active_per_token,
            "active_per_token_with_embedding": self.active_per_token_with_embedding,
            "wrapper": self.wrapper,
            "towers_not_counted": list(self.towers_not_counted),
            "towers": self.towers,
            "estimates": self.estimates,
            "estimate_error": self.estimate_error,
        }


def closed_form_estimates(spec: ModelSpec) -> dict[str, int]:
    """The closed-form parameter rules of thumb (L = decoder layers + encoder layers, d = d_model, V = vocab)."""
    L = spec.n_layers + (spec.encoder.n_layers if spec.encoder else 0)
    d, V = spec.d_model, spec.vocab_size
    return {
        "12Ld2": 12 * L * d * d,
        "12Ld2+13Ld": 12 * L * d * d + 13 * L * d,
        "12Ld2+13Ld+Vd": 12 * L * d * d + 13 * L * d + V * d,
    }


@lru_cache(maxsize=512)
def param_report(spec: ModelSpec, attention: str = "flash") -> ParamReport:
    """The parameters as served (``flash``, the default), or as transformers allocates them (``eager``): they
    differ only where transformers allocates weights a serving engine does not (LongCat-Flash's zero experts,
    :func:`llmath.ops.moe.routed_experts`)."""
    ops = build_ops(spec, "prefill", attention)
    if spec.is_encoder_decoder:  # the decoder prefill holds the decoder's weights, the encoder pass the rest
        ops = build_ops(spec, "encoder", attention) + ops
    by_component: dict[str, int] = {}
    per_layer: dict[str, int] = {}
    layer_counts: dict[str, int] = {}
    for op in ops:
        for key, n in op.params:
            by_component[key] = by_component.get(key, 0) + n * op.count
        if op.layer_kind and op.count > 0:
            per_layer[op.layer_kind] = per_layer.get(op.layer_kind, 0) + op.n_params
            layer_counts[op.layer_kind] = op.count
    lm_total = sum(by_component.values())
    towers: dict[str, int] = {}
    for key, n in spec.tower_params:  # a wrapper's vision tower and projector: in the total, not per token
        by_component[key] = n
        towers[key.split(".")[0]] = towers.get(key.split(".")[0], 0) + n
    total = sum(by_component.values())
    with_table = lm_total
    if spec.moe is not None:
        experts = sum(n for k, n in by_component.items() if k.startswith("moe.experts."))
        with_table = total - experts // spec.moe.n_experts * (spec.moe.n_experts - spec.moe.top_k)
    # a tied table is the LM head's weight too, all of it used by every token: only an untied one drops
    table_rows = 0 if spec.tie_embeddings else by_component.get("embedding.token", 0)
    read = spec.d_model * max(1, spec.codebooks)  # a token reads one row (MusicGen: one of each codebook's table)
    active = with_table - table_rows + (read if table_rows else 0) - _unread_ngram_rows(spec, by_component)
    est = closed_form_estimates(spec)
    return ParamReport(
        model=spec.name,
        total=total,
        by_component=dict(sorted(by_component.items())),
        per_layer=per_layer,
        layer_counts=layer_counts,
        active_per_token=active,
        estimates=est,
        estimate_error={k: (v - lm_total) / lm_total for k, v in est.items()},
        active_per_token_with_embedding=with_table,
        wrapper=spec.wrapper,
        towers_not_counted=spec.towers_not_counted,
        towers=towers,
    )


def _unread_ngram_rows(spec: ModelSpec, by_component: dict[str, int]) -> int:
    """Qwen4-Exp's n-gram tables (``embedding.ngram``): a token reads one row per hash head of each PLE
    layer (E elements a layer); the rest is left out of the active count, as the token table's other rows."""
    if spec.blt is not None:  # BLT: a byte reads one row of each hash table, and its byte row is D_encoder wide
        blt, hashed = spec.blt, by_component.get("embedding.hash", 0)
        return hashed - blt.hash_tables * blt.encoder.d_model + spec.d_model - blt.encoder.d_model
    tables = by_component.get("embedding.ngram", 0)
    if not tables or spec.ngram is None:
        return 0
    return tables - spec.ngram.embed_dim * sum(k.startswith("ple+") for k in spec.layer_mixers)


# ---- weight bytes per module ------------------------------------------------------------------------


@lru_cache(maxsize=512)
def module_params(spec: ModelSpec) -> dict[str, int]:
    """Parameters per checkpoint module (embedding, attention, ffn, experts, ...; :attr:`Op.module`), and a
    wrapper's counted towers (``vision``, ``projector``: loaded with the language model, at its format)."""
    out: dict[str, int] = {}
    ops = build_ops(spec, "prefill", "flash")
    if spec.is_encoder_decoder:  # the encoder's weights (and the shared token table) too
        ops = build_ops(spec, "encoder", "flash") + ops
    for op in ops:
        if op.params:
            out[op.module] = out.get(op.module, 0) + op.n_params * op.count
    for key, n in spec.tower_params:
        out[key.split(".")[0]] = out.get(key.split(".")[0], 0) + n
    return out


def _projection_bpe(spec: ModelSpec, p: Precision, bpe: dict[str, float]) -> dict[str, float]:
    """Bytes per element of each module some of whose projections a checkpoint keeps in another format
    (:attr:`Precision.projections`): those projections' bytes plus the rest's at the module's, over its parameters."""
    kept = dict(p.projections)
    if not kept:
        return {}
    ops = [op for op in build_ops(spec, "prefill", "flash") if op.params]
    mods = {op.module for op in ops if op.name in kept}
    n = {m: 0 for m in mods}
    b = {m: 0.0 for m in mods}
    for op in (op for op in ops if op.module in mods):
        each = p.bytes_per_element(kept[op.name]) if op.name in kept else bpe[op.module]
        n[op.module] += op.n_params * op.count
        b[op.module] += op.n_params * op.count * each
    return {m: b[m] / n[m] for m in mods}


@lru_cache(maxsize=1024)
def _bpe(spec: ModelSpec, p: Precision) -> tuple[tuple[str, float], ...]:
    params = module_params(spec)
    out = {m: p.module_weight_bytes(m) for m in (*MODULES, *params)}  # other components: the default format
    out |= _projection_bpe(spec, p, out)
    meas = dict(p.measured_bytes)
    for m in MODULES:
        if meas.get(m) and params.get(m):
            out[m] = meas[m] / params[m]
    if "total" in meas:  # only the index's total: scale every module to it
        pred = sum(n * out[m] for m, n in params.items())
        per_param = meas["total"] / max(sum(params.values()), 1)
        if not MIN_STORED_BPP <= per_param <= MAX_STORED_BPP:
            raise ConfigError(
                f"{spec.name}: model.safetensors.index.json metadata.total_size={meas['total']:,} bytes is "
                f"{per_param:.3g} bytes per parameter; a checkpoint stores {MIN_STORED_BPP:g} (1 bit) to "
                f"{MAX_STORED_BPP:g} (fp64); fix the index"
            )
        out = {m: b * meas["total"] / pred for m, b in out.items()}
    return tuple(out.items())


def weight_bytes_per_element(spec: ModelSpec, p: Precision) -> dict[str, float]:
    """Bytes per weight element of each module: measured header bytes / the module's parameters where a
    checkpoint's headers were read, else from the module's format (:meth:`Precision.module_weight_bytes`)."""
    return dict(_bpe(spec, p))


def weight_bytes(spec: ModelSpec, p: Precision) -> dict[str, float]:
    """Weight bytes per module (parameters × bytes per element); the total is their sum."""
    bpe = weight_bytes_per_element(spec, p)
    return {m: n * bpe[m] for m, n in module_params(spec).items()}


def weight_bytes_of(spec: ModelSpec, p: Precision, ops=None, tower_share: float = 0.0) -> float:
    """Total weight bytes of ``spec`` (or of the operators ``ops``, e.g. one GPU's shard, plus the
    ``tower_share`` of a wrapper's counted towers that GPU holds) at ``p``."""
    if ops is None:
        return float(sum(weight_bytes(spec, p).values()))
    bpe = weight_bytes_per_element(spec, p)
    towers = sum(n * bpe.get(k.split(".")[0], p.weight_bytes) for k, n in spec.tower_params) * tower_share
    return float(sum(n * op.count * bpe.get(op.module, p.weight_bytes) for op in ops for _, n in op.params) + towers)
