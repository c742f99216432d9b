"""Fuzzing (hypothesis, bounded examples): CLI arguments, mutated config.json files and library calls.

Whatever the input: the exit code is 0, 1 or 2; no traceback; JSON output has only finite numbers; and
an accepted value is the value used (an invalid one is refused, never rounded, clamped or replaced).
"""

import json
import math

import pytest
from helpers import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llmath
from llmath import LLMathError, ParallelConfig, Workload
from llmath.model import registry
from llmath.output import to_json

FUZZ = settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)


run = run_cli


def strict_json(text):
    def refuse(c):
        raise AssertionError(f"non-finite JSON literal {c}")

    return json.loads(text, parse_constant=refuse)


def as_int(text):
    """The integer a string denotes, or None (an independent reading: Python's int())."""
    try:
        return int(text, 10)
    except ValueError:
        return None


def as_float(text):
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


NUMBERS = st.sampled_from(
    ["0", "1", "2", "-1", "7", "64", "1000", "4096", "2.5", "1e3", "nan", "inf", "-inf", "1e400", "abc", "",
     " 3", "0x10", str(2**24), str(2**24 + 1), str(2**32), str(2**32 + 1), str(10**30), "1" * 5000]
)  # fmt: skip
WORDS = st.sampled_from(
    ["eager", "flash", "fp8", "int4", "ideal", "h100-sxm", "none", ",", "/tmp", "/dev/null", "1:8:x2", "0:4:x2",
     "1:4:+0", "decode"]
)  # fmt: skip
INT_OPTS = {"--batch": ("batch", 1, 2**24), "--prompt": ("prompt", 1, 2**32), "--gen": ("gen", 1, 2**32)}


def _check_common(code, out, err, as_json):
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    if code:
        assert err.strip().splitlines()[-1].startswith("error: "), err
    elif as_json:
        strict_json(out)


@FUZZ
@given(opt=st.sampled_from(sorted(INT_OPTS)), value=NUMBERS)
def test_analyze_integer_options(capsys, opt, value):
    key, lo, hi = INT_OPTS[opt]
    code, out, err = run(capsys, "analyze", "llama-3.2-1b", "--prompt", "64", "--gen", "8", opt, value, "--json")
    _check_common(code, out, err, True)
    n = as_int(value)
    valid = n is not None and lo <= n <= hi
    if code == 0:
        assert valid, (opt, value)
        assert strict_json(out)["workload"][key] == n  # exactly the value given
    elif code == 2:
        assert not valid or "Traceback" not in err


@FUZZ
@given(value=NUMBERS)
def test_analyze_reserve_gb(capsys, value):
    code, out, err = run(capsys, "analyze", "llama-3.2-1b", "--reserve-gb", value, "--json")
    _check_common(code, out, err, True)
    v = as_float(value)
    if code == 0:
        assert v is not None and 0 <= v <= 1e9, value
        assert strict_json(out)["memory"]["reserve_bytes"] == pytest.approx(v * 1e9, rel=1e-12)
    else:
        assert v is None or v < 0 or v > 1e9, value


@FUZZ
@given(
    cmd=st.sampled_from(["analyze", "ops", "params", "sweep", "estimates", "seeds", "compare", "models", "bogus"]),
    opts=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "--batch",
                    "--prompt",
                    "--gen",
                    "--prefix",
                    "--context",
                    "--attention",
                    "--dtype",
                    "--kv-dtype",
                    "--efficiency",
                    "--hardware",
                    "-H",
                    "--matmul-eff",
                    "--overhead-us",
                    "--top",
                    "--group-size",
                    "--peak-tflops",
                    "--stage",
                    "--bogus",
                ]
            ),  # fmt: skip
            st.one_of(
                NUMBERS,
                st.sampled_from(
                    [
                        "eager",
                        "flash",
                        "fp8",
                        "int4",
                        "ideal",
                        "h100-sxm",
                        "none",
                        ",",
                        "/tmp",
                        "/dev/null",
                        "1:8:x2",
                        "0:4:x2",
                        "1:4:+0",
                        "decode",
                    ]
                ),
            ),  # fmt: skip
        ),
        max_size=3,
    ),
    json_=st.booleans(),
)
def test_any_command_line(capsys, cmd, opts, json_):
    args = [cmd] + (["llama-3.2-1b"] if cmd not in ("models", "bogus") else [])
    for k, v in opts:
        args += [k, v]
    if json_:
        args.append("--json")
    code, out, err = run(capsys, *args)
    _check_common(code, out, err, json_ and cmd != "bogus")


# ---- mutated config.json files ----------------------------------------------------------------------

INT_FIELDS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
              "vocab_size", "head_dim", "max_position_embeddings"]  # fmt: skip
BOOL_FIELDS = ["tie_word_embeddings", "attention_bias", "mlp_bias"]
VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.sampled_from([[], {}, [1], "false", "true", "4096", 1.5, 0, -1, 2048.0, 64.0]),
)
BASE = registry.config("llama-3.2-1b")
BASE_TOTAL = llmath.params("llama-3.2-1b").total


@FUZZ
@given(key=st.sampled_from(INT_FIELDS + BOOL_FIELDS), value=VALUES)
def test_mutated_config_field(tmp_path_factory, key, value):
    cfg = dict(BASE)
    cfg[key] = value
    p = tmp_path_factory.mktemp("cfg") / "config.json"
    p.write_text(json.dumps(cfg))
    try:
        total = llmath.params(str(p)).total
    except LLMathError:
        return
    # accepted: the value must be of the field's JSON kind, and where it equals the original (4096.0 ==
    # 4096), the count must be the original's
    if key in BOOL_FIELDS:
        assert value is None or isinstance(value, bool), (key, value)
    else:
        ok_int = not isinstance(value, bool) and isinstance(value, int | float) and float(value).is_integer()
        assert value is None or (ok_int and value >= 1), (key, value)
    if value is not None and not isinstance(value, bool) and value == BASE.get(key):
        assert total == BASE_TOTAL


@FUZZ
@given(
    cut=st.integers(0, len(json.dumps(BASE))),
    literal=st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999", "9" * 40]),
)
def test_mutated_config_text(tmp_path_factory, cut, literal):
    text = json.dumps(BASE)
    d = tmp_path_factory.mktemp("cfg")
    (d / "config.json").write_text(text[:cut])  # truncated JSON
    try:
        llmath.params(str(d / "config.json"))
    except LLMathError:
        pass
    # a non-finite or huge literal in place of any number is refused, whichever field holds it
    numbers = [k for k, v in BASE.items() if isinstance(v, int | float) and not isinstance(v, bool)]
    key = numbers[cut % len(numbers)]
    cfg = dict(BASE)
    cfg[key] = "@@"
    (d / "config.json").write_text(json.dumps(cfg).replace('"@@"', literal))
    with pytest.raises(LLMathError, match=key):
        llmath.params(str(d / "config.json"))


# ---- library calls ---------------------------------------------------------------------------------

ANY = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.just([1]),
)


@FUZZ
@given(key=st.sampled_from(["batch", "prompt", "gen", "prefix", "reserve_bytes", "attention", "precision",
                            "efficiency_mode", "matmul", "overhead_s", "tp", "tensor_parallel"]),
       value=ANY)  # fmt: skip
def test_library_arguments(key, value):
    try:
        sizes = ("batch", "prompt", "gen", "prefix")
        kw = {"parallel": ParallelConfig(tp=value)} if key == "tp" else {} if key in sizes else {key: value}
        work = Workload(**{"prompt": 64, "gen": 8, **({key: value} if key in sizes else {})})
        a = llmath.analyze("llama-3.2-1b", "h100-sxm", workload=work, **kw)
    except LLMathError:
        return
    assert key != "tensor_parallel"
    if key in ("batch", "prompt", "gen", "prefix"):
        assert not isinstance(value, bool) and float(value).is_integer() and a.workload[key] == value
    strict_json(to_json(a.to_dict()))
