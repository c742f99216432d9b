"""A rate refusal states the largest rate the deployment answers (deploy/rate_limit.py): every rate below the one
printed is answered, and a rate just above it refused, whichever of the three checks (the closed loop's largest
requests/s, the prompt budget, the running slots) binds."""

import math
import re

import pytest

import llmath
from llmath import Workload
from llmath.deploy.rate_limit import REL, largest_rate
from llmath.errors import RateError


def _printed(err: RateError) -> float:
    return float(re.search(r"\(([\d.]+) requests/s", str(err)).group(1))


@pytest.mark.parametrize(
    "engine,prompt,gen,what",
    [
        ("trtllm", 4096, 64, "prompt budget serves"),  # long prompts: the prompt budget binds
        ("sglang", 512, 128, "deployment sustains"),  # short prompts: the running slots bind
    ],
)
def test_every_rate_below_the_printed_one_is_answered(engine, prompt, gen, what):
    def serve(rate):
        work = Workload(prompt=prompt, gen=gen, rate=rate)
        return llmath.serve("llama-3.1-8b", "h100-sxm", engine=engine, workload=work)

    with pytest.raises(RateError) as e:
        serve(1000.0)
    msg = str(e.value)
    assert msg.startswith("request rate 1000/s exceeds what this") and what in msg
    top = _printed(e.value)
    for f in (0.5, 0.9, 0.99):
        ttft = serve(f * top).metrics["ttft_s"]
        assert math.isfinite(ttft) and ttft > 0
    with pytest.raises(RateError, match=rf"request rate {1.01 * top:g}/s exceeds what this") as above:
        serve(1.01 * top)
    assert _printed(above.value) == top  # the same largest rate, whatever rate was refused


def test_largest_rate_bisects_to_the_first_refused_rate():
    # a deployment whose closed loop sustains 10/s and whose other checks refuse above 3.7/s (a limit of 2/s stated
    # at the rate asked, as a rate-dependent check would): the refusal states 3.7/s, the check that binds there
    def refusal(r):
        if r > 10:
            return RateError(r, 10.0, "deployment sustains", " at 64 concurrent")
        return RateError(r, 2.0, "deployment's prompt budget serves") if r > 3.7 else None

    err = largest_rate(refusal, refusal(8.0))
    assert 3.7 * (1 - REL) <= err.sustained <= 3.7 and err.rate == 8.0
    assert err.what == "deployment's prompt budget serves"
    # above the closed loop's largest rate, that check's limit bounds the search and its wording stays
    closed = largest_rate(lambda r: RateError(r, 10.0, "deployment sustains") if r > 10 else None,
                          RateError(50.0, 10.0, "deployment sustains"))  # fmt: skip
    assert closed.sustained == pytest.approx(10, rel=REL) and closed.rate == 50.0
