"""Active parameters per token against the figures the model authors publish."""

from llmath import Workload
from llmath.model import registry
from llmath.ops.params import param_report


def test_gpt_oss_active_matches_the_model_card():
    """gpt-oss model card (arXiv:2508.10925, Table 1): 5.13B active for gpt-oss-120b, 3.61B for -20b; the
    embedding contributes the one row a token reads, the unembedding all of it."""
    assert round(param_report(registry.spec("gpt-oss-120b")).active_per_token / 1e9, 2) == 5.13
    assert round(param_report(registry.spec("gpt-oss-20b")).active_per_token / 1e9, 2) == 3.61


def test_mixtral_active_with_the_embedding_table_matches_mistral():
    """Mistral AI, "Mixtral of experts" (mistral.ai/news/mixtral-of-experts): 46.7B total, 12.9B active per
    token, a figure that counts the whole embedding table."""
    rep = param_report(registry.spec("mixtral-8x7b"))
    assert round(rep.total / 1e9, 1) == 46.7
    assert round(rep.active_per_token_with_embedding / 1e9, 1) == 12.9
    assert rep.active_per_token == rep.active_per_token_with_embedding - (rep.by_component["embedding.token"] - 4096)


def test_sliding_window_kv_growth():
    """gpt-oss-20b: 24 layers alternating a 128-token window and full attention, 8 KV heads of width 64.
    Per position every layer adds 2 (K, V) x 8 x 64 x 2 bytes = 2,048 B; once the windows are full only
    the 12 full layers grow: 12 x 2,048 = 24,576 B; the 12 windows hold 12 x 2,048 x 128 B."""
    from llmath.analysis import analyze, kv_cache_bytes
    from llmath.model.dtypes import Precision

    kv = analyze("gpt-oss-20b", workload=Workload(batch=1, prompt=1000, gen=2)).kv_cache
    assert kv["bytes_per_token"] == 24 * 2048
    assert kv["growth_bytes_per_token"] == 12 * 2048
    assert kv["window_bytes"] == 12 * 2048 * 128
    assert kv["windows_full_at"] == 128
    spec, p = registry.spec("gpt-oss-20b"), Precision()
    for S in (1000, 5000):  # the stated law: growth · S + window bytes, past the windows
        assert kv_cache_bytes(spec, 1, S, p) == kv["growth_bytes_per_token"] * S + kv["window_bytes"]


def test_tied_embedding_is_all_active():
    """gemma-2-2b ties its embedding to the LM head: every token's logits use the whole table, so a dense
    tied model's active count is its total."""
    spec = registry.spec("gemma-2-2b")
    assert spec.tie_embeddings and spec.moe is None
    rep = param_report(spec)
    assert rep.active_per_token == rep.total == rep.active_per_token_with_embedding
