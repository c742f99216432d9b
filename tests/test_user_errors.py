"""Errors that point the right way: device names as people write them, layout errors computed from the constraint
given, the trained-context note in the README's position convention, model-file errors in the file's own terms."""

from __future__ import annotations

import struct

import pytest

from llmath.deploy.layout import ParallelConfig, make_layout
from llmath.errors import ConfigError, LayoutError, UnknownNameError
from llmath.hardware import get
from llmath.hardware.registry import _data
from llmath.model.notes import context_message
from llmath.model.registry import resolve


@pytest.mark.parametrize("name", ["H100-SXM", "h100", "H100", " h100-sxm "])
def test_h100_names_people_write(name):
    assert get(name).name == "h100-sxm"


def test_every_alias_has_a_source():
    d = _data()
    assert set(d.get("alias_sources", {})) <= set(d["aliases"])
    assert d["alias_sources"]["h100"].startswith("the 8-GPU H100 servers are H100 SXM5")


def test_unknown_device_suggests_the_alias_first():
    with pytest.raises(UnknownNameError, match=r"unknown hardware .H100X'; closest: h100, h100-sxm"):
        get("H100X")


def test_tp_that_does_not_divide_gpus_invents_no_dp():
    # llama-3.1-70b: 64 query heads, 8 KV heads (its config.json); tp = 3 divides neither 8 GPUs nor 64 heads
    with pytest.raises(LayoutError) as e:
        make_layout(resolve("llama-3.1-70b"), ParallelConfig(gpus=8, tp=3))
    msg = str(e.value)
    assert "3·1·2" not in msg and "= 6" not in msg  # no dp = 8 // 3 = 2 made up
    assert "8 is not a multiple of 3" in msg and "64 attention heads" in msg
    # the layouts offered use the 8 GPUs given, each with a tp dividing 64 and 8: 1, 2, 4, 8
    assert msg.endswith("layouts that work on 8 GPUs: --tp 1 --dp 8, --tp 2 --dp 4, --tp 4 --dp 2, --tp 8")


def test_layouts_offered_are_for_the_gpus_given():
    # tp·pp = 4·4 = 16 > 8 GPUs; keeping pp = 4 leaves 8 / 4 = 2 GPUs a stage (tp 1 dp 2, tp 2), then pp = 1
    with pytest.raises(LayoutError, match=r"layouts that work on 8 GPUs: --tp 1 --pp 4 --dp 2, --tp 2 --pp 4,"):
        make_layout(resolve("llama-3.1-70b"), ParallelConfig(gpus=8, tp=4, pp=4))
    # pp = 3 does not divide 6 GPUs: the free tp is named, not set to 6 // 3 = 2
    with pytest.raises(LayoutError, match=r"--gpus 8 with pp = 3: 8 is not a multiple of 3 \(no whole tp\)"):
        make_layout(resolve("llama-3.1-70b"), ParallelConfig(gpus=8, pp=3))


def test_context_note_follows_the_position_convention():
    # README conventions: a decode step at context S attends S + 1 positions; llama-2-7b's table holds 4096
    spec = resolve("llama-2-7b")
    assert spec.max_positions == 4096
    assert context_message(spec, 4096) is None  # prompt 4096, gen 1 or a step at context 4095: positions 0..4095
    msg = context_message(spec, 4097)  # a step at context 4096 needs position 4096
    assert msg is not None and "position 4096 is past" in msg and "positions 0 to 4095" in msg
    assert "4097" not in msg  # the position that does not fit, not a count of positions
    assert "--context 4095" in msg  # the last step whose new token (position 4095) is in the table


def test_context_4096_cli_names_the_position_and_the_context_that_fits(capsys):
    from llmath.cli import main

    # llama-2-7b: max_position_embeddings 4096 (positions 0..4095); a step at context 4096 writes position 4096
    assert main(["ops", "llama-2-7b", "--stage", "decode", "--context", "4096"]) in (0, None)
    err = capsys.readouterr().err
    assert "position 4096 is past" in err and "--context 4095" in err and "4097" not in err
    assert main(["ops", "llama-2-7b", "--stage", "decode", "--context", "4095"]) in (0, None)
    assert "position table" not in capsys.readouterr().err


def _gguf(fields: list[tuple[str, int, bytes]]) -> bytes:
    """A GGUF v3 header with no tensors (ggml/docs/gguf.md: magic, version, tensor count, KV count, KVs)."""

    def s(x: str) -> bytes:
        return struct.pack("<Q", len(x)) + x.encode()

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(fields))
    return out + b"".join(s(k) + struct.pack("<I", t) + v for k, t, v in fields)


def test_gguf_and_toml_errors_do_not_talk_about_config_json(tmp_path):
    u32, string = 4, 8  # GGUF value types
    p = tmp_path / "m.gguf"
    p.write_bytes(
        _gguf(
            [
                ("general.architecture", string, struct.pack("<Q", 5) + b"llama"),
                ("llama.block_count", u32, struct.pack("<I", 2)),
                ("llama.vocab_size", u32, struct.pack("<I", 100)),
                ("llama.embedding_length", u32, struct.pack("<I", 64)),
            ]
        )
    )
    with pytest.raises(ConfigError) as e:
        resolve(str(p))
    assert "config.json" not in str(e.value) and "GGUF" in str(e.value)
    t = tmp_path / "m.toml"
    t.write_text("hidden_size = 64\n")
    with pytest.raises(ConfigError) as e:
        resolve(str(t))
    assert "JSON at line" not in str(e.value) and "not TOML" in str(e.value)
