"""Regenerate the published serving rows' table of docs/validation.md from ``llmath validate --published
--serving`` (:func:`llmath.measure.serving_validation.validate_serving`).

Usage: PYTHONPATH=src python scripts/validation_published.py. Replaces the text between the two markers below.
"""

from __future__ import annotations

import sys

from doc_section import ROOT, commit, replace_section

from llmath.measure.serving_validation import validate_serving

DOC = ROOT / "docs" / "validation.md"
BEGIN = "<!-- published-serving:begin (scripts/validation_published.py) -->"
END = "<!-- published-serving:end -->"
HEAD = "| id | engine | setup | hardware × GPUs | model | P/G | metric | measured | predicted | error | running |"


def _value(metric: str, v: float) -> str:
    return f"{v:.0f} tok/s" if metric == "throughput_tok_s" else f"{1e3 * v:.1f} ms"


def markdown(rep: dict) -> str:
    lines = [f"Computed by `llmath validate --published --serving` at commit {commit()}.", "", HEAD]
    lines.append("|" + "---|" * HEAD.count(" | ") + "---|")
    for r in rep["rows"]:
        setup = r["setup"] + (f" {r['concurrency']:g}" if r.get("concurrency") else "")
        lines.append(
            f"| {r['id']} | {r['engine']} | {setup} | {r['hardware']} × {r['gpus']} | {r['model']}"
            f" | {r['prompt']}/{r['gen']} | {r['metric']} | {_value(r['metric'], r['measured'])}"
            f" | {_value(r['metric'], r['predicted'])} | {100 * r['error']:+.1f}% | {r['running']:.0f} |"
        )
    lines += ["", "| group | rows | median \\|error\\| | worst |", "|---|---|---|---|"]
    s = rep["summary"]
    for name, g in [("all", s["overall"]), *s["groups"].items()]:
        lines.append(
            f"| {name.replace('=', ' ')} | {g['n']} | {100 * g['median_abs_error']:.0f}%"
            f" | {100 * g['worst_error']:+.0f}% |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    replace_section(DOC, BEGIN, END, markdown(validate_serving()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
