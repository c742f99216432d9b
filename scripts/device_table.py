"""Print docs/devices.md's validation table: llmath against public single-device results.

    PYTHONPATH=src python scripts/device_table.py

Rows come from src/llmath/data/device_results.json; predictions from llmath.measure.devices (efficiency
``expected``, the row's engine). tests/test_device_table.py checks that the docs hold what this prints.
"""

from __future__ import annotations

from llmath.measure import devices


def lines() -> list[str]:
    """The markdown table rows, then the summary table, as docs/devices.md holds them."""
    checks = devices.checks()
    out = [
        "| device | class | model | weights | test | measured tok/s | llmath tok/s | error |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    for c in checks:
        r = c.row
        out.append(
            f"| `{r['device']}` | {r['class']} | {r['model']} | {r['weights']} | {r['test']}{r['tokens']} | "
            f"{r['tokens_per_s']:g} | {c.predicted:.1f} | {100 * c.error:+.0f}% |"
        )
    s = devices.summary(checks)
    out += ["", "| median \\|error\\| | " + " | ".join(s["tg"]) + " |", "|---|" + "---:|" * len(s["tg"])]
    for test, name in (("tg", "batch-1 decode (tg)"), ("pp", "prefill (pp)")):
        out.append(f"| {name} | " + " | ".join(f"{100 * v:.0f}%" for v in s[test].values()) + " |")
    return out


if __name__ == "__main__":
    print("\n".join(lines()))
