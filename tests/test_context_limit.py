"""Requests past the model's context (docs/context.md): every serving entry point refuses them as the engines do
(vLLM refuses prompt + max_tokens > max_model_len, ``OpenAIServing._validate_input``), unless
``--allow-long-context``; the single-pass analysis keeps its note. The limits come from the models' configs:
gpt2's ``n_positions`` is 1024 (huggingface.co/openai-community/gpt2, config.json), Llama-3.1-8B's
``max_position_embeddings`` 131072 (huggingface.co/meta-llama/Llama-3.1-8B, config.json), BART-large's 1024
(huggingface.co/facebook/bart-large) and Whisper-large-v3's decoder ``max_target_positions`` 448
(huggingface.co/openai/whisper-large-v3)."""

import json
import math

import pytest
from helpers import run_cli

import llmath
from llmath import UsageError, Workload
from llmath.deploy.disagg import serve_disaggregated
from llmath.errors import WorkloadError

GPT2 = ("gpt2", "-H", "h100-sxm", "--prompt", "2000")  # 2000 + the default --gen 128 > 1024


@pytest.mark.parametrize(
    "args,value,limit",
    [
        (("analyze", *GPT2, "--concurrency", "4"), "2000", "1024"),
        (("analyze", *GPT2, "--rate", "1"), "2000", "1024"),
        (("analyze", *GPT2, "--concurrency", "4", "--arrival", "offline"), "2000", "1024"),
        (("analyze", *GPT2, "--concurrency", "4", "--disagg"), "2000", "1024"),
        (("analyze", *GPT2, "--concurrency", "4", "--gen-dist", "10:1,500:1"), "2000", "1024"),
        (("plan", *GPT2, "--gpus", "1"), "2000", "1024"),
        (("plan", *GPT2, "--gpus", "2", "--disagg"), "2000", "1024"),
        (("analyze", "llama-3.1-8b", "-H", "h100", "--prompt", "200000", "--gen", "10", "-c", "4"), "200000", "131072"),
        # bench predicts before its run: refused before any request reaches the (here absent) server
        (("bench", "http://127.0.0.1:9", "--model", "gpt2", "-c", "2", *GPT2[1:]), "2000", "1024"),
    ],
)
def test_serving_past_the_context_is_a_usage_error(capsys, args, value, limit):
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and not out, (code, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert value in err and limit in err  # the value and the rule's limit
    assert "--allow-long-context" in err  # what to do next (or shorten the lengths)


def test_single_pass_analysis_keeps_its_note(capsys):
    code, out, err = run_cli(capsys, "analyze", *GPT2, "--json")
    assert code == 0, err
    assert any("1024" in w for w in json.loads(out)["warnings"])
    assert "warning:" in err


def test_allow_long_context_is_refused_for_a_static_batch(capsys):
    code, out, err = run_cli(capsys, "analyze", *GPT2, "--allow-long-context")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "--allow-long-context" in err and "--concurrency" in err


@pytest.mark.parametrize("extra", [("--concurrency", "4"), ("--rate", "1"), ("--concurrency", "4", "--disagg")])
def test_allow_long_context_times_it_with_a_note(capsys, extra):
    code, out, err = run_cli(capsys, "analyze", *GPT2, *extra, "--allow-long-context", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert math.isfinite(d["ttft_s"]) and math.isfinite(d["tpot_s"]) and d["ttft_s"] > 0
    assert any("1024" in n and "extrapolate" in n for n in d["notes"])


def test_plan_with_allow_long_context_notes_it(capsys):
    code, out, err = run_cli(capsys, "plan", *GPT2, "--gpus", "1", "--allow-long-context", "--json")
    assert code == 0, err
    assert any("1024" in n for n in json.loads(out)["notes"])


def test_the_boundary_is_vllms_rule():
    # vLLM accepts prompt + max_tokens <= max_model_len: 1000 + 24 = 1024 runs, 1000 + 25 = 1025 does not
    llmath.serve("gpt2", "h100-sxm", workload=Workload(prompt=1000, gen=24, concurrency=1))
    with pytest.raises(WorkloadError, match="1025"):
        llmath.serve("gpt2", "h100-sxm", workload=Workload(prompt=1000, gen=25, concurrency=1))
    # with output lengths drawn from a distribution, the longest counts: 1000 + 100 > 1024
    dist = Workload(prompt=1000, gen_dist=((10, 1.0), (100, 1.0)), concurrency=1)
    with pytest.raises(WorkloadError, match="1100"):
        llmath.serve("gpt2", "h100-sxm", workload=dist)


def test_library_entry_points_refuse_and_allow():
    long = Workload(prompt=2000, gen=10, concurrency=2)
    with pytest.raises(WorkloadError, match="2010"):
        serve_disaggregated("gpt2", "h100-sxm", workload=long, prefill={}, decode={})
    with pytest.raises(WorkloadError, match="2010"):
        llmath.plan("gpt2", "h100-sxm", gpus=1, workload=Workload(prompt=2000, gen=10))
    d = serve_disaggregated("gpt2", "h100-sxm", workload=long, prefill={}, decode={}, allow_long_context=True)
    assert len(d["notes"]) == 1 and math.isfinite(d["ttft_s"])
    rep = llmath.serve("gpt2", "h100-sxm", workload=long, allow_long_context=True)
    assert any("2010" in n for n in rep.notes)
    with pytest.raises(UsageError, match="allow_long_context='yes'"):
        llmath.serve("gpt2", "h100-sxm", workload=long, allow_long_context="yes")


def test_encoder_decoder_lengths():
    # BART's source reads the decoder's table of 1024 rows; its decoder holds a start token + the output
    for prompt, gen in ((2000, 10), (500, 1100)):
        with pytest.raises(WorkloadError, match="1024"):
            llmath.serve("bart-large", "h100-sxm", workload=Workload(prompt=prompt, gen=gen, concurrency=1))
    llmath.serve("bart-large", "h100-sxm", workload=Workload(prompt=1000, gen=10, concurrency=1))
    # Whisper's source is its own 1500-frame window; the decoder's 448 positions hold 1 + 447 tokens
    llmath.serve("whisper-large-v3", "h100-sxm", workload=Workload(prompt=1500, gen=447, concurrency=1))
    with pytest.raises(WorkloadError, match="448"):
        llmath.serve("whisper-large-v3", "h100-sxm", workload=Workload(prompt=1500, gen=448, concurrency=1))


def test_page_api_refuses_and_allows():
    from llmath.web import api

    params = {"model": "gpt2", "prompt": "2000", "concurrency": "4"}
    with pytest.raises(WorkloadError, match="2000"):
        api.analyze_view(params)
    with pytest.raises(WorkloadError, match="2000"):
        api.plan({"model": "gpt2", "prompt": "2000", "gpus": "1"})
    d = api.analyze_view(params | {"allow_long_context": "1"})
    assert any("1024" in n for n in d["serving"]["notes"])
    with pytest.raises(WorkloadError, match="allow_long_context='yes'"):
        api.analyze_view(params | {"allow_long_context": "yes"})
