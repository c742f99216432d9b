"""`llmath models` groups: an index entry's own ``family``, then data/model_families.json, then the rule."""

from __future__ import annotations

import dataclasses

from llmath.model import registry


def test_index_family_key_and_the_data_table_group_new_models(monkeypatch):
    base = registry.index()
    extra = {
        "my-llama-finetune": {"repo": "org/my-llama-finetune", "source": "x", "family": "llama"},
        "falcon-h1-7b": {"repo": "tiiuae/Falcon-H1-7B-Base", "source": "x"},
    }
    monkeypatch.setattr(registry, "index", lambda: base | extra)
    real_spec = registry.spec

    def spec(name):  # a bundled config standing in for a user's new file, with the new model_type
        if name == "falcon-h1-7b":
            return dataclasses.replace(real_spec("falcon-7b"), model_type="falcon_h1")
        return real_spec(name)

    monkeypatch.setattr(registry, "spec", spec)
    groups = registry.by_family()
    assert "my-llama-finetune" in groups["llama"]  # the entry's "family" key
    assert "falcon-h1-7b" in groups["falcon"]  # model_type falcon_h1 -> falcon, from the data table
    assert "falcon_h" not in groups  # what the suffix rule alone would have made of falcon_h1
    assert sum(len(v) for v in groups.values()) == len(registry.names())


def test_the_table_names_model_types_not_registry_names():
    table = registry.family_groups()
    assert table["mixtral"] == "mistral" and table["falcon_h1"] == "falcon"
    assert not set(table) & set(registry.names())  # keys are model_types (mixtral), not names (mixtral-8x7b)
