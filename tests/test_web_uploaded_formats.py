"""A config.json uploaded to the page keeps the formats its quantization_config states.

The reference for every comparison is the library given the same config.json as a file (the CLI's path:
``llmath analyze DIR/config.json`` reads it through :func:`llmath.model.checkpoint.load`), a call independent of
the page's upload handling; the expected format names come from the configs' own ``quantization_config``.
"""

import json
import threading
import urllib.request

import pytest

from llmath.analysis import analyze
from llmath.deploy.plan import plan
from llmath.deploy.service import serve
from llmath.deploy.workload import Workload
from llmath.model import registry
from llmath.web import api, make_server

# (bundled config, what its quantization_config states, as llmath names the weight format)
CASES = [
    # deepseek-ai/DeepSeek-V3 config.json: quant_method "fp8", weight_block_size [128, 128] -> block-scaled FP8
    ("deepseek-v3", "fp8-block"),
    # openai/gpt-oss-20b config.json: quant_method "mxfp4" (MoE experts only; attention, router, embeddings kept)
    ("gpt-oss-20b", "mxfp4"),
    # meta-llama/Meta-Llama-3-8B config.json: no quantization_config, torch_dtype bfloat16
    ("llama-3-8b", "bf16"),
]
PARAMS = {"hardware": "h200", "prompt": "1000", "gen": "100"}


def _as_file(tmp_path, name):
    """The bundled config.json written to DIR/config.json (DIR named as the model: the spec's name)."""
    cfg = registry.config(name)
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return cfg, str(d / "config.json")


@pytest.mark.parametrize(("name", "weights"), CASES, ids=[c[0] for c in CASES])
def test_uploaded_config_analyses_as_its_file(tmp_path, name, weights):
    cfg, path = _as_file(tmp_path, name)
    page = api.analyze_view(PARAMS | {"model": name}, cfg)
    ref = analyze(path, "h200", workload=Workload(prompt=1000, gen=100)).to_dict()  # the file's reading
    assert ref["workload"]["weights"] == weights
    assert {k: page[k] for k in ref} == ref  # every key the library returns, equal (the page adds roofline/split)


@pytest.mark.parametrize(("name", "weights"), CASES, ids=[c[0] for c in CASES])
def test_uploaded_config_plans_as_its_file(tmp_path, name, weights):
    cfg, path = _as_file(tmp_path, name)
    page = api.plan(PARAMS | {"model": name, "gpus": "8"}, cfg)
    ref = plan(path, "h200", gpus=8, workload=Workload(prompt=1000, gen=100)).to_dict()
    assert list(ref["formats"]["by_weights"]) == [weights] and ref["formats"]["from"] == "checkpoint"
    page.pop("seconds"), ref.pop("seconds")  # the search's wall time
    assert page == ref


def test_uploaded_config_serves_as_its_file(tmp_path):
    cfg, path = _as_file(tmp_path, "gpt-oss-20b")
    page = api.analyze_view(PARAMS | {"model": "gpt-oss-20b", "concurrency": "4"}, cfg)["serving"]
    ref = serve(path, "h200", workload=Workload(prompt=1000, gen=100, concurrency=4)).to_dict()
    assert page == ref and ref["workload"]["weights"] == "mxfp4"


def test_page_choices_still_override_an_uploaded_config(tmp_path):
    cfg, path = _as_file(tmp_path, "deepseek-v3")
    page = api.analyze_view(PARAMS | {"model": "deepseek-v3", "weights": "nvfp4"}, cfg)
    from llmath.model.checkpoint import precision_for

    ref = analyze(path, "h200", workload=Workload(prompt=1000, gen=100), precision=precision_for(path, weights="nvfp4"))
    assert page["workload"]["weights"] == "nvfp4" and page["memory"] == ref.to_dict()["memory"]


def test_posted_config_keeps_its_formats_over_http():
    server = make_server(0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        body = json.dumps({"params": PARAMS | {"model": "gpt-oss-20b"}, "config": registry.config("gpt-oss-20b")})
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/api/analyze",
            data=body.encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            d = json.loads(r.read())
    finally:
        server.shutdown()
        server.server_close()
    # gpt-oss-20b's quantization_config: mxfp4 experts; modules_to_not_convert keeps self_attn in 16 bits
    assert d["workload"]["weights"] == "mxfp4"
    assert d["precision"]["modules"]["experts"] == "mxfp4" and d["precision"]["modules"]["attention"] == "bf16"


def test_the_pages_kv_choice_reaches_the_planner(tmp_path):
    # the page's KV format (kv_dtype=fp8) plans as the library's kv_dtype="fp8" on the same file: an FP8 cache
    # holds a token's K and V in 1 byte an element against bf16's 2, which the planned formats report
    cfg, path = _as_file(tmp_path, "llama-3-8b")
    page = api.plan(PARAMS | {"model": "llama-3-8b", "gpus": "8", "kv_dtype": "fp8"}, cfg)
    ref = plan(path, "h200", gpus=8, workload=Workload(prompt=1000, gen=100), kv_dtype="fp8").to_dict()
    bf16 = plan(path, "h200", gpus=8, workload=Workload(prompt=1000, gen=100)).to_dict()
    page.pop("seconds"), ref.pop("seconds"), bf16.pop("seconds")
    assert page == ref and ref != bf16
