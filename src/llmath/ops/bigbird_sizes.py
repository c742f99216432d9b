"""Sizes of BigBird's block-sparse encoder attention (transformers 5.23 ``modeling_bigbird_pegasus.py``,
``BigBirdPegasusEncoder.forward`` and ``BigBirdPegasusBlockSparseAttention.bigbird_block_sparse_attention``),
per sequence, for a source of T tokens, blocks of ``b`` positions and ``r`` random blocks per query block.

* **When it runs.** transformers runs block-sparse attention only when T > (5 + 2·r)·b (two global blocks,
  three sliding blocks and 2·r random blocks); at or below it the encoder switches to full attention
  (``set_attention_type("original_full")``, a warning) and attends all T × T pairs.
* **Padding.** Block-sparse first pads the source to Tp = ⌈T / b⌉·b positions (pad tokens, masked out), and
  every encoder layer and the final LayerNorm run over the Tp rows; the output is cut back to T rows, so the
  decoder cross-attends T positions. With n = Tp / b blocks:
* **Score entries per head** (the QKᵀ products; the value products have the same shapes):
  the first and the last query block attend every key, 2·b·Tp; the second and the second-to-last attend
  (4 + r) blocks, 2·(4 + r)·b²; each of the n − 4 middle blocks attends 3 sliding, r random and 2 global
  blocks, (n − 4)·(5 + r)·b². Random blocks are gathered copies; masked entries are computed too.
"""

from __future__ import annotations

import numpy as np

Value = int | float | np.ndarray


def is_sparse(T: Value, b: int, r: int) -> Value:
    """Whether transformers runs block-sparse attention on T source tokens (else full attention)."""
    return T > (5 + 2 * r) * b


def encoder_rows(T: Value, b: int, r: int) -> Value:
    """Rows every encoder layer runs per sequence: Tp = ⌈T / b⌉·b under block-sparse, else T."""
    padded = -(-T // b) * b
    if isinstance(T, np.ndarray):
        return np.where(is_sparse(T, b, r), padded, T)
    return padded if is_sparse(T, b, r) else T


def score_entries(T: Value, b: int, r: int) -> Value:
    """Score entries per head and sequence: 2·b·Tp + 2·(4 + r)·b² + (n − 4)·(5 + r)·b² under block-sparse
    (n = Tp / b blocks), else T·T."""
    tp = -(-T // b) * b
    sparse = 2 * b * tp + 2 * (4 + r) * b * b + (tp // b - 4) * (5 + r) * b * b
    if isinstance(T, np.ndarray):
        return np.where(is_sparse(T, b, r), sparse, T * T)
    return sparse if is_sparse(T, b, r) else T * T


def dense_probs(T: Value, b: int, r: int) -> Value:
    """Entries of the dense Tp × Tp attention-probability matrix per head and sequence that transformers 5.23's
    block-sparse path fills (zeros, then the attended blocks scattered in) and returns: Tp² under block-sparse,
    else 0 (full attention's T × T scores are the score entries themselves)."""
    tp = -(-T // b) * b
    if isinstance(T, np.ndarray):
        return np.where(is_sparse(T, b, r), tp * tp, 0)
    return tp * tp if is_sparse(T, b, r) else 0


SIZES = {"bR": encoder_rows, "bE": score_entries, "bF": dense_probs}


def bigbird_monomial(m: str, B: Value, T: Value) -> Value:
    """``bR:b:r`` = B × encoder rows, ``bE:b:r`` = B × score entries per head, ``bF:b:r`` = B × dense
    probability entries per head."""
    kind, b, r = m.split(":")
    return B * SIZES[kind](T, int(b), int(r))


def bigbird_text(m: str) -> str:
    kind, b, r = m.split(":")
    text = {"bR": "rows", "bE": "block-sparse entries", "bF": "dense probability entries"}[kind]
    return f"B·{text}[b={b},r={r}]"
