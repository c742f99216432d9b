"""scripts/fit_vllm_moe_prefill.py: its leave-one-model-out choice and its row filter."""

from helpers import script_module

fit = script_module("fit_vllm_moe_prefill")


def test_each_model_is_judged_at_the_value_the_other_models_pick():
    # errors by candidate µs: model a is best at 100 (0.01), model b best at 200 (0.02); the held-out model gets
    # the value the other's rows pick, and its own median |error| there
    by_value = {
        100.0: {"1": ("a", 0.01), "2": ("a", -0.01), "3": ("b", 0.30)},
        200.0: {"1": ("a", 0.20), "2": ("a", -0.20), "3": ("b", -0.02)},
    }
    got = fit.leave_one_model_out(by_value)
    assert got["a"] == {"picked_us": 200.0, "held_out_abs": 0.20}
    assert got["b"] == {"picked_us": 100.0, "held_out_abs": 0.30}


def test_only_vllm_rows_of_models_with_routed_experts_are_fitted(tmp_path):
    rows = [
        ("1", "vllm", "agg", "openai/gpt-oss-120b"),  # 36 MoE layers (config.json: every layer routes)
        ("2", "vllm", "agg", "meta-llama/Llama-3.1-70B-Instruct"),  # dense
        ("3", "sglang", "agg", "openai/gpt-oss-120b"),  # another engine
        ("4", "vllm", "disagg", "openai/gpt-oss-120b"),  # disaggregated
    ]
    path = tmp_path / "runs.csv"
    path.write_text("id,backend,mode,model_path\n" + "".join(",".join(r) + "\n" for r in rows))
    assert [r["id"] for r in fit.moe_rows(path)] == ["1"]
