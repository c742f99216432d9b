"""A usage error names the value, the rule and what to do next, in one line, exit code 2 (the project's rule for
bad input). Each case asserts the three parts, not the wording: the bad value as given, the rule's limit or
the names it allows, and a next step (a value or flag to give, or something to drop or leave out)."""

import re

import pytest
from helpers import run_cli

M = ("llama-3-8b", "-H", "h100-sxm")
SERVE = ("analyze", *M, "-c", "8")
# a next step: a value or flag to give (or an example of one), something to drop or leave out, or the values that work
NEXT = re.compile(
    r"[;:,.] ((give|add|drop|use|pick|pass|leave|raise|relax|shorten|merge|run)\b|e\.g\. )|that work", re.I
)


@pytest.mark.parametrize(
    "args,value,rule",
    [
        (("analyze", *M, "-c", "0"), "concurrency=0", "[1, "),
        (("analyze", *M, "--rate", "0"), "rate=0", "(0, "),
        (("analyze", *M, "--prompt", "0"), "0", "[1, "),  # a length of 0
        (("analyze", *M, "--gen", "0"), "0", "[1, "),
        (("analyze", *M, "-b", "0"), "0", "[1, "),
        (("plan", *M, "--prompt", "0"), "prompt=0", "[1, "),
        (("analyze", *M, "--gpus", "0"), "0", "[1, "),
        (("plan", *M, "--gpus", "0"), "gpus=0", "[1, "),
        (("analyze", *M, "--tp", "0"), "0", "[1, "),
        ((*SERVE, "--disagg", "--prefill-tp", "0"), "0", "[1, "),
        ((*SERVE, "--max-num-seqs", "0"), "max_num_seqs=0", "[1, "),
        ((*SERVE, "--gpu-memory-utilization", "1.5"), "1.5", "(0, 1]"),
        ((*SERVE, "--prefix-hit", "1"), "prefix_hit=1", "[0, 1)"),
        ((*SERVE, "--gen-dist", "64:inf"), "inf", "finite"),
        (("plan", *M, "--ttft-ms", "0"), "ttft_ms=0", "(0, "),
        (("analyze", *M, "--matmul-eff", "2"), "2", "(0, 1]"),
        (("analyze", *M, "--top", "-1"), "-1", "[0, "),
        (("ops", "llama-3-8b", "--stage", "decode", "--context", "-1"), "-1", "[0, "),
        (("sweep", *M, "--batch", "4:2"), "4:2", "a <= b"),
        (("sweep", *M, "--batch", "1:8:x1"), "x1", "k >= 2"),
        ((*SERVE, "--arrival", "foo"), "foo", "closed, staggered, poisson, offline"),
        (("analyze", *M, "--rate", "1", "--arrival", "closed"), "closed", "--concurrency"),
        ((*SERVE, "--engine", "foo"), "foo", "vllm"),
        (("analyze", "llama-3-8b", "-H", "foo"), "foo", "hardware"),
        (("analyze", "llama-3-8bb"), "llama-3-8bb", "models"),
        (("analyze", *M, "--tp", "3"), "tp=3", "32 attention heads"),  # TP divisibility
        (("analyze", *M, "--gpus", "8", "--tp", "3"), "3", "multiple of 3"),  # GPU count
        (("analyze", "mixtral-8x7b", "-H", "h100-sxm", "--gpus", "8", "--ep", "3"), "ep=3", "divide"),  # EP
        (("analyze", *M, "--pp", "64"), "pp=64", "32 layers"),  # PP
        (("analyze", *M, "--gpus", "2", "--dp", "2", "-c", "1"), "concurrency=1", "one request per replica"),
        (("analyze", "mixtral-8x7b", "-H", "h100-sxm", "--tp", "2", "--overlap", "tbo"), "tbo", "--ep > 1"),
        ((*SERVE, "--spec-method", "foo"), "foo", "draft, eagle, mtp"),
        ((*SERVE, "--spec-method", "eagle"), "eagle", "--acceptance"),
        ((*SERVE, "--spec-method", "eagle", "--acceptance", "9"), "9", "k + 1"),
        (("analyze", *M, "--peak-tflops", "100"), "--peak-tflops", "--memory-gb"),
        # a flag that does nothing for this model is refused, never ignored
        (("analyze", *M, "--decoder-prompt", "2"), "decoder_prompt=2", "decoder-only"),
        (("ops", "llama-3-8b", "--decoder-prompt", "2"), "--decoder-prompt 2", "decoder-only"),
    ],
)
def test_usage_error_names_value_rule_and_next_step(capsys, args, value, rule):
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and not out, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err
    assert value in err and rule in err
    assert NEXT.search(err), err  # what to do next


@pytest.mark.parametrize(
    "flag,suggested",
    [("--prompt", "--prompt "), ("--gen", "--gen "), ("--gpus", "--gpus "), ("--tp", "--tp "), ("--batch", "--batch ")],
)
def test_a_range_error_suggests_its_own_option(capsys, flag, suggested):
    # the next step names the option to give again, with an example value
    code, _, err = run_cli(capsys, "analyze", *M, flag, "0")
    assert code == 2
    assert re.search(re.escape(suggested) + r"\d", err.split(";", 1)[1]), err
