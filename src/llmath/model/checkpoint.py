"""A checkpoint as llmath reads it: the spec, and the formats its files state, with where each came from.

``load(model)`` accepts a registry name, a hub id (bundled ones offline, case-insensitive; others fetched
with :mod:`llmath.model.hub`), a config.json or a directory holding one, or a ``.gguf`` file. Beside a
config it reads, in this order of precedence:

1. ``hf_quant_config.json`` (ModelOpt) over ``quantization_config`` in config.json (:mod:`.quant`);
2. safetensors headers (``*.safetensors``; only the 8-byte length and the JSON header of each file are
   read): the bytes of every tensor, summed per module (``Precision.measured_bytes``), so weight memory
   and each module's bytes per element (header bytes / the module's parameters, in
   :func:`llmath.ops.params.weight_bytes_per_element`) are exact. With only
   ``model.safetensors.index.json`` present its ``metadata.total_size`` scales every module to that total.

A ``.gguf`` gives the config, every tensor's type and bytes (:mod:`.gguf`). Flags override all of it
(:func:`precision_for`); the report lists the source of each format (``Precision.sources``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmath.errors import ConfigError, SpecError
from llmath.model import formats as fmt
from llmath.model.config_check import file_kind, local_paths, parse_json
from llmath.model.dtypes import MODULES, Precision
from llmath.model.quant import checkpoint_reading, layer_index, module_of, projection_op
from llmath.model.sidecar_check import check_index, check_safetensors_header, read_sidecar
from llmath.model.spec import ModelSpec

SIDECAR = "hf_quant_config.json"
MAX_HEADER = 100 << 20  # safetensors caps headers at 100 MB


@dataclass(frozen=True)
class Checkpoint:
    spec: ModelSpec
    precision: Precision | None  # None: the checkpoint states no formats (bf16 by default)
    origin: str = ""  # what the formats were read from
    notes: tuple[str, ...] = ()
    header_bytes: int | None = None  # weight bytes from tensor headers (exact), if read


def _index(path: Path) -> dict[str, Any]:
    return check_index(read_sidecar(path), path)


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a ``.safetensors`` file (reads 8 bytes + the header, never tensor data)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ConfigError(f"{path}: truncated safetensors file (no 8-byte header length)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER:
                raise ConfigError(f"{path}: safetensors header length {n} exceeds 100 MB; not a safetensors file")
            raw = f.read(n)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: safetensors header is not UTF-8 JSON; the file is damaged") from None
    return check_safetensors_header(parse_json(text, f"{path} (safetensors header)"), path)


def tensor_bytes(headers) -> dict[str, int]:
    """Bytes per llmath module summed over the tensors of safetensors headers ('other': unmapped names)."""
    out: dict[str, int] = {}
    for h in headers:
        for name, t in h.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            m = module_of(name) or "other"
            out[m] = out.get(m, 0) + int(b) - int(a)
    return out


def _header_precision(d: Path, p: Precision) -> tuple[Precision, int | None, list[str]]:
    """``p`` with the bytes the safetensors headers beside a config measure (per module, or the index's total)."""
    files = sorted(d.glob("*.safetensors"))
    notes: list[str] = []
    idx = d / "model.safetensors.index.json"
    index = _index(idx) if idx.exists() else {}
    listed = set((index.get("weight_map") or {}).values())
    if listed and not listed <= {f.name for f in files}:  # a partial download: only the index's total is exact
        notes.append(f"safetensors: {len(listed - {f.name for f in files})} shard(s) absent; using the index total")
        files = []
    if files:
        by = tensor_bytes(safetensors_header(f) for f in files)
        if by.get("other"):
            notes.append(f"safetensors: {by['other']:,} bytes in tensors llmath maps to no module (not counted)")
        meas = {m: b for m, b in by.items() if m in MODULES and b}
        src = dict(p.sources) | {m: "safetensors headers" for m in meas}
        return replace(p, measured_bytes=meas, sources=src), sum(meas.values()), notes
    if idx.exists():
        total = (index.get("metadata") or {}).get("total_size")
        if isinstance(total, int) and total > 0:
            src = dict(p.sources) | {"total": "model.safetensors.index.json metadata.total_size"}
            return replace(p, measured_bytes={"total": total}, sources=src), total, notes
    return p, None, notes


def _layers_with(spec: ModelSpec, module: str) -> set[int]:
    """The decoder layers that hold ``module`` (attention: attention layers; experts: MoE layers; ...)."""
    kinds = list(zip(spec.layer_mixers, spec.layer_moe, strict=True))
    if module == "attention":
        return {i for i, (k, _) in enumerate(kinds) if k.startswith("attention")}
    if module in ("experts", "shared_experts", "router"):
        return {i for i, (_, moe) in enumerate(kinds) if moe}
    if module == "ffn":
        return {i for i, (k, moe) in enumerate(kinds) if not moe and spec.layer_has_ffn(k)}
    return set(range(spec.n_layers))


def _per_layer_exclusions(reading, spec: ModelSpec) -> None:
    """Exclusion lists that name a module layer by layer (ModelOpt's ``model.layers.7.self_attn*``): when they
    name it in every layer that holds it, the module stays 16-bit; otherwise it is counted quantised, noted."""
    for m, (idx, where, names) in reading.layers.items():
        have = _layers_with(spec, m)
        if have and all(projection_op(n) for n in names):  # named projection by projection
            _kept_projections(reading, m, have, where, names)
        elif have and have <= idx:
            reading.modules[m] = "bf16"
            reading.sources[m] = f"{where} (the {m} of all {len(have)} layers that hold it)"
        else:
            listed = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
            reading.notes.append(
                f"{where}: {listed} keep the {m} of {len(idx & have)} of {len(have)} layers unquantised; "
                "counted as quantised"
            )


def _kept_projections(reading, module: str, have: set[int], where: str, names: list[str]) -> None:
    """Entries naming a module's projections layer by layer (``model.layers.7.self_attn.q_a_proj``): a projection
    named in every layer that holds the module keeps the 16-bit format (:attr:`Precision.projections`); the rest
    of the module keeps the checkpoint's format; one named in only some layers is counted quantised, noted."""
    by_op: dict[str, set[int]] = {}
    for n in names:
        by_op.setdefault(str(projection_op(n)), set()).add(layer_index(n) or 0)
    kept = sorted(op for op, idx in by_op.items() if have <= idx)
    for op in kept:
        reading.projections[op] = "bf16"
    if kept:
        reading.sources[module] = f"{where} ({', '.join(kept)} of all {len(have)} layers kept 16-bit)"
    for op in sorted(set(by_op) - set(kept)):
        reading.notes.append(
            f"{where}: {op} kept unquantised in {len(by_op[op] & have)} of {len(have)} layers; counted as quantised"
        )


def from_config(cfg: dict[str, Any], spec: ModelSpec, sidecar: dict | None, where: str) -> Checkpoint:
    reading = checkpoint_reading(cfg, sidecar, where)
    if reading is None:
        return Checkpoint(spec, None, "")
    _per_layer_exclusions(reading, spec)
    act16 = "fp16" if str(cfg.get("torch_dtype") or cfg.get("dtype")) == "float16" else "bf16"
    mods = {m: (act16 if f in ("bf16", "fp16") else f) for m, f in reading.modules.items()}
    reading.modules = mods
    reading.projections = {o: (act16 if f in ("bf16", "fp16") else f) for o, f in reading.projections.items()}
    reading.activations = reading.activations or act16
    p = reading.precision(Precision.uniform(act16))
    origin = f"{where}/{SIDECAR}" if sidecar else f"{where} quantization_config"
    return Checkpoint(spec, p, origin, tuple(reading.notes))


def config_checkpoint(
    cfg: dict[str, Any], name: str, source: str, where: str, sidecar: dict | None = None
) -> Checkpoint:
    """A config.json object as a checkpoint: its spec and the formats its ``quantization_config`` (or a ModelOpt
    ``sidecar``) states, read ``where``. :func:`load_dir` reads a file's config through it, and the page an
    uploaded one, so both see the same formats."""
    from llmath.model.hf import spec_from_config

    return from_config(cfg, spec_from_config(cfg, name=name, source=source), sidecar, where)


def load_dir(d: Path, name: str | None = None, source: str | None = None) -> Checkpoint:
    """A directory (or config.json path) with its sidecar and safetensors headers."""
    from llmath.model.hf import read_config

    cfg_path = d / "config.json" if file_kind(d) == "dir" else d
    folder = cfg_path.parent
    cfg = read_config(cfg_path)
    stem = name or (folder.name if cfg_path.name == "config.json" else cfg_path.stem)
    side = folder / SIDECAR
    sidecar = read_sidecar(side) if side.exists() else None
    ck = config_checkpoint(cfg, stem, source or str(cfg_path), str(folder), sidecar)
    p, hb, notes = _header_precision(folder, ck.precision or Precision())
    if hb is None:
        return ck
    origin = ck.origin + "; " if ck.origin else ""
    return replace(
        ck, precision=p, origin=origin + "safetensors headers", notes=ck.notes + tuple(notes), header_bytes=hb
    )


def load_gguf(path: Path) -> Checkpoint:
    from llmath.model.gguf import file_type_name, gguf_type_format, in_gguf_terms, module_summary, read_gguf
    from llmath.model.hf import spec_from_config

    cfg, tensors = read_gguf(path)
    ftype = cfg.pop("_gguf_file_type", None)
    arch = cfg.pop("_gguf_architecture")
    try:
        spec = spec_from_config(cfg, name=path.stem, source=str(path))
    except (ConfigError, SpecError) as e:  # its rules speak of config fields: name the GGUF keys read
        raise type(e)(in_gguf_terms(str(e), arch)) from None
    total, dominant, _ = module_summary(tensors)
    meas = {m: b for m, b in total.items() if m in MODULES}
    mods = {m: gguf_type_format(t) for m, t in dominant.items() if m in MODULES}
    mix = file_type_name(ftype)
    weights = mix if mix and (mix in fmt.gguf_mixes() or mix in fmt.formats()) else mods.get("ffn", "fp16")
    src = {m: "gguf tensor types" for m in mods} | {"weights": "gguf general.file_type"}
    p = Precision(weights=weights, activations="fp16", kv="fp16", modules=mods, measured_bytes=meas, sources=src)
    return Checkpoint(spec, p, f"{path} (GGUF header)", (), sum(total.values()))


@lru_cache(maxsize=256)
def load(model: str) -> Checkpoint:
    """A model name, hub id, config path or .gguf -> :class:`Checkpoint` (see the module docstring)."""
    from llmath.model import registry

    name = registry.lookup(model)
    if name is not None:
        return registry.checkpoint(name)
    p = Path(model)
    kind = file_kind(p) if local_paths() else "missing"
    if p.suffix.lower() == ".gguf" and local_paths():
        if kind != "file":
            raise ConfigError(f"{str(p)[:200]}: no such GGUF file (a regular .gguf file is needed)")
        return load_gguf(p)
    if local_paths() and (p.suffix == ".json" or kind != "missing"):
        return load_dir(p)
    from llmath.model import hub

    if hub.looks_like_repo_id(model):
        return load_dir(hub.fetch(model), name=model.split("/")[-1].lower(), source=f"https://huggingface.co/{model}")
    raise registry.unknown_model(model)


def precision_for(
    model: str | ModelSpec | Checkpoint,
    dtype: str | None = None,
    weights: str | None = None,
    activations: str | None = None,
    kv: str | None = None,
    group_size: int | None = None,
    ssm: str | None = None,
) -> Precision:
    """The precision to analyse ``model`` at: the checkpoint's formats (bf16 if it states none), with
    ``dtype`` replacing all of them and ``weights``/``activations``/``kv``/``group_size`` overriding;
    ``ssm``: the SSM state's format (unset: the config's ``mamba_ssm_cache_dtype``, :mod:`llmath.ops.ssm_state`).
    ``model``: a name or path (read with :func:`load`), a :class:`Checkpoint` already read, or a bare spec (bf16)."""
    stated: Precision | None = None
    if isinstance(model, str | Checkpoint):
        ck = load(model) if isinstance(model, str) else model
        spec, stated = ck.spec, ck.precision
    else:
        spec = model
    if dtype is not None:
        base = Precision.uniform(
            dtype, sources={"weights": "flag --dtype", "activations": "flag --dtype", "kv": "flag --dtype"}
        )
    else:
        base = stated or _default_precision()
    published = _published(model, weights) if dtype is None else None
    if published is not None:  # the model's published checkpoint in that format: its per-module formats
        base, weights = published, None
    p = base.override(weights=weights, activations=activations, kv=kv, group_size=group_size, ssm=ssm)
    return expand_mix(spec, p)


def _published(model: str | ModelSpec | Checkpoint, weights: str | None) -> Precision | None:
    """The formats of a registry model's published checkpoint in ``weights`` (index.json ``checkpoints``)."""
    from llmath.model import registry

    if weights is None or not isinstance(model, str) or (name := registry.lookup(model)) is None:
        return None
    ck = registry.format_checkpoint(name, fmt.canonical(weights, "weights"))
    return ck.precision if ck is not None else None


@lru_cache(maxsize=1)
def _default_precision() -> Precision:
    """``Precision()``, built once (a frozen value; the scalar scenario path asks for it every call)."""
    return Precision()


def expand_mix(spec: ModelSpec, p: Precision) -> Precision:
    """A llama.cpp file type (q4_k_m, ...) as weights, without measured bytes: per-module bytes by its rules."""
    if p.module_bytes or p.measured_bytes or p.weights not in fmt.gguf_mixes():
        return p
    from llmath.model.gguf import mix_module_bytes

    mb = {m: b for m, b in mix_module_bytes(spec, p.weights).items() if m not in dict(p.modules)}
    src = dict(p.sources) | {m: f"llama.cpp {p.weights} rules" for m in mb}
    return replace(p, module_bytes=mb, sources=src)
