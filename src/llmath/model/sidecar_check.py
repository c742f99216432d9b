"""The files beside a config.json, read as strictly as config.json (:mod:`.config_check`).

Each is parsed by :func:`~llmath.model.config_check.parse_json` (no duplicate keys, no NaN/Infinity, bounded
nesting) and its fields checked before any is used; a bad one is a :class:`~llmath.errors.ConfigError` naming
the file, the field and the rule:

* a safetensors header: an object of tensors, each an object with ``dtype`` (a string), ``shape`` (a list of
  integers >= 0) and ``data_offsets`` ([begin, end], integers with 0 <= begin <= end < 2^63);
* ``model.safetensors.index.json``: ``weight_map`` an object of tensor name -> file name, ``metadata`` an
  object whose ``total_size`` is a positive integer (how it compares with the parameter count:
  :func:`llmath.ops.params.weight_bytes_per_element`);
* ``quantization_config`` (config.json) and ``hf_quant_config.json``: each field llmath reads has its JSON kind
  (``QUANT_FIELDS``; null means absent), ``config_groups`` an object of objects whose ``weights`` /
  ``input_activations`` / ``output_activations`` are objects of ``GROUP_FIELDS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmath.errors import ConfigError
from llmath.model.config_check import parse_json, read_text_file

MAX_SIDECAR_BYTES = 64 << 20  # an index of ~10^5 tensors is a few MB; a header is capped at 100 MB by safetensors
MAX_OFFSET = 1 << 63
STR, INT, BOOL, STRS, INTS, OBJ, STR_OR_OBJ = "str", "int", "bool", "strs", "ints", "obj", "str_or_obj"
KIND_TEXT = {
    STR: "a string",
    INT: "an integer",
    BOOL: "true or false",
    STRS: "a list of strings",
    INTS: "a list of integers",
    OBJ: "an object",
    STR_OR_OBJ: "a string or an object",
}
QUANT_FIELDS = {  # transformers' quantizer configs (utils/quantization_config.py) and ModelOpt's hf_quant_config
    "quant_method": STR,
    "bits": INT,
    "w_bit": INT,
    "group_size": INT,
    "q_group_size": INT,
    "zero_point": BOOL,
    "weight_block_size": INTS,
    "activation_scheme": STR,
    "modules_to_not_convert": STRS,
    "ignore": STRS,
    "llm_int8_skip_modules": STRS,
    "exclude_modules": STRS,
    "config_groups": OBJ,
    "kv_cache_scheme": OBJ,
    "load_in_4bit": BOOL,
    "load_in_8bit": BOOL,
    "_load_in_4bit": BOOL,
    "_load_in_8bit": BOOL,
    "bnb_4bit_quant_type": STR,
    "bnb_4bit_compute_dtype": STR,
    "bnb_4bit_use_double_quant": BOOL,
    "quant_type": STR_OR_OBJ,
    "quant_type_kwargs": OBJ,
    "quant_algo": STR,
    "kv_cache_quant_algo": STR,
    "quantization": OBJ,
}
GROUP_FIELDS = {"num_bits": INT, "type": STR, "strategy": STR, "group_size": INT, "symmetric": BOOL}
GROUP_PARTS = ("weights", "input_activations", "output_activations")


def read_sidecar(path: Path) -> Any:
    """A JSON file beside a config, parsed as strictly as config.json."""
    return parse_json(read_text_file(path, f"{path.name} file", MAX_SIDECAR_BYTES), str(path))


def _is(kind: str, v: Any) -> bool:
    if kind == STR:
        return isinstance(v, str)
    if kind == INT:
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == BOOL:
        return isinstance(v, bool)
    if kind in (STRS, INTS):
        return isinstance(v, list) and all(_is(STR if kind == STRS else INT, x) for x in v)
    if kind == OBJ:
        return isinstance(v, Mapping)
    return isinstance(v, str | Mapping)


def check_fields(d: Any, fields: Mapping[str, str], where: str) -> None:
    """``d`` is an object whose known fields (null: absent) have their kinds."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where}={_short(d)} must be a JSON object; fix the file")
    for k, kind in fields.items():
        v = d.get(k)
        if v is not None and not _is(kind, v):
            raise ConfigError(f"{_at(where, k)}={_short(v)} must be {KIND_TEXT[kind]} (or null); fix the file")


def check_quant(q: Any, where: str) -> None:
    """A quantization_config / hf_quant_config.json object (see the module docstring)."""
    check_fields(q, QUANT_FIELDS, where)
    if isinstance(q.get("quantization"), Mapping):
        check_quant(q["quantization"], _at(where, "quantization"))
    for name, g in (q.get("config_groups") or {}).items():
        group = _at(where, f"config_groups.{name}")
        check_fields(g, {"targets": STRS, **dict.fromkeys(GROUP_PARTS, OBJ)}, group)
        for part in GROUP_PARTS:
            if g.get(part) is not None:
                check_fields(g[part], GROUP_FIELDS, f"{group}.{part}")
    if q.get("kv_cache_scheme") is not None:
        check_fields(q["kv_cache_scheme"], GROUP_FIELDS, _at(where, "kv_cache_scheme"))
    qt = q.get("quant_type")
    if isinstance(qt, Mapping):
        for k, v in qt.items():
            check_fields(v, {"_type": STR, "_data": OBJ}, _at(where, f"quant_type.{k}"))


def check_safetensors_header(h: Any, path: Path) -> dict[str, Any]:
    """A parsed safetensors header (see the module docstring)."""
    if not isinstance(h, Mapping):
        raise ConfigError(f"{path}: the safetensors header is {type(h).__name__}, not an object; the file is damaged")
    for name, t in h.items():
        if name == "__metadata__":
            continue
        where = f"{path}: tensor {name[:120]!r}"
        if not isinstance(t, Mapping):
            raise ConfigError(f"{where} is {_short(t)}, not an object with dtype, shape and data_offsets")
        off = t.get("data_offsets")
        ok = isinstance(off, list) and len(off) == 2 and all(_is(INT, x) for x in off)
        if not (ok and isinstance(off, list) and 0 <= off[0] <= off[1] < MAX_OFFSET):
            raise ConfigError(f"{where}: data_offsets={_short(off)} must be [begin, end], integers 0 <= begin <= end")
        if not isinstance(t.get("dtype"), str) or not (_is(INTS, t.get("shape")) and min(t["shape"], default=0) >= 0):
            raise ConfigError(f"{where}: needs dtype (a string) and shape (a list of integers >= 0)")
    return dict(h)


def check_index(idx: Any, path: Path) -> dict[str, Any]:
    """A parsed model.safetensors.index.json (see the module docstring)."""
    check_fields(idx, {"weight_map": OBJ, "metadata": OBJ}, str(path))
    wm = idx.get("weight_map") or {}
    bad = next((k for k, v in wm.items() if not isinstance(v, str)), None)
    if bad is not None:
        raise ConfigError(f"{path}: weight_map[{bad[:120]!r}]={_short(wm[bad])} must be a file name (a string)")
    total = (idx.get("metadata") or {}).get("total_size")
    if total is not None and not (_is(INT, total) and total > 0):
        raise ConfigError(f"{path}: metadata.total_size={_short(total)} must be a positive integer (bytes)")
    return dict(idx)


def _at(where: str, key: str) -> str:
    """'dir/x.json: key' for a file's top level, 'dir/x.json: a.key' below it."""
    return f"{where}: {key}" if where.endswith(".json") else f"{where}.{key}"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
