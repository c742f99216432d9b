"""The Byte Latent Transformer's stacks (BLT, arXiv:2412.09871; transformers 5.23 ``modeling_blt.py``).

A BLT model is four Llama-style stacks of their own widths (RMSNorm, SwiGLU FFN, rotary, no biases):

- ``patcher``: the entropy model, a small byte LM over the bytes whose next-byte entropies place the patch
  boundaries (``BltPatcher``; built only when ``patch_in_forward``, run when ``patching_mode`` is "entropy");
- ``encoder``: the local encoder over the bytes, whose last (or every) layer's output is max-pooled per patch,
  projected to ``cross_k`` rows of its width and refined by a cross-attention from those patch rows to the bytes;
- ``global_``: the global (latent) transformer over the patches;
- ``decoder``: the local decoder over the bytes, each of its (or its first) layers preceded by a cross-attention
  from the bytes to the ``cross_k`` rows per patch the global output projects to.

:attr:`bytes_per_patch` is the one stated input that sizes the global stack: P = bytes / bytes_per_patch
patches (see :mod:`llmath.ops.blt`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from llmath.errors import SpecError


@dataclass(frozen=True)
class BltStack:
    """One stack's widths: D wide, ``n_layers`` layers of N query / K key-value heads of D // N, FFN width F."""

    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int = 0  # its own byte table (encoder, patcher: V × D) and, for the patcher, its head (D × V)

    def validate(self, name: str, which: str) -> None:
        for f in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff"):
            if getattr(self, f) <= 0:
                raise SpecError(f"{name!r}: blt.{which}.{f}={getattr(self, f)} must be > 0")
        if self.d_model % self.n_heads or self.n_heads % self.n_kv_heads:
            raise SpecError(
                f"{name!r}: blt.{which}: hidden_size={self.d_model}, num_attention_heads={self.n_heads} and "
                f"num_key_value_heads={self.n_kv_heads} must divide (BltSelfAttention's head width is D // N)"
            )


@dataclass(frozen=True)
class BltSpec:
    # execution traits (model/traits.py): no cache, every pass reruns every byte; no parallel rule for the stacks
    reruns_context: ClassVar[bool] = True
    unsharded: ClassVar[str] = "the Byte Latent Transformer's four stacks of their own widths"

    encoder: BltStack
    global_: BltStack
    decoder: BltStack
    patcher: BltStack | None  # None: patch_in_forward false (no entropy model built)
    cross_k: int  # rows per patch in the cross-attentions (cross_attn_k)
    encoder_cross_all: bool  # a cross-attention after every encoder layer (else after the last only)
    decoder_cross_all: bool  # a cross-attention before every decoder layer (else before the first only)
    hash_rows: int  # rows of the hash n-gram table: functions × group sizes × hash vocabulary
    hash_tables: int  # functions × group sizes: the rows each byte reads from it
    decoder_patch_in: int  # the decoder's patch projection input width (its hidden_size_global)
    bytes_per_patch: int  # the mean patch length that sizes the global stack (P = bytes / this)
    entropy_patching: bool  # the patcher runs in the forward (patching_mode "entropy" with a patcher)

    def validate(self, name: str) -> None:
        for which in ("encoder", "global_", "decoder"):
            getattr(self, which).validate(name, which.rstrip("_"))
        if self.patcher is not None:
            self.patcher.validate(name, "patcher")
        for f in ("cross_k", "hash_rows", "hash_tables", "bytes_per_patch"):
            if getattr(self, f) <= 0:
                raise SpecError(f"{name!r}: blt.{f}={getattr(self, f)} must be > 0")
        if self.encoder.d_model != self.decoder.d_model or self.decoder_patch_in != self.global_.d_model:
            raise SpecError(
                f"{name!r}: BLT's local decoder reads the local encoder's output and the global output: encoder "
                f"hidden_size={self.encoder.d_model} must equal decoder hidden_size={self.decoder.d_model}, and "
                f"decoder hidden_size_global={self.decoder_patch_in} the global hidden_size={self.global_.d_model}"
            )

    @property
    def global_in(self) -> int:
        """Width of a patch as the global stack receives it: the encoder's ``cross_k`` rows side by side."""
        return self.encoder.d_model * self.cross_k
