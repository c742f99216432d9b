"""How many kernels a serving engine launches for one run of an operator: an execution trait each operator
declares where it is built (:attr:`llmath.ops.core.Op.launches`, 1 unless stated here).

The operator list names the projections and element-wise steps of the model's own code; the serving engines'
model code runs some of them as one kernel and one of them as several. What counts these launches is a pass
launched op by op from Python, with no CUDA graph (the eager floor, :func:`llmath.hardware.roofline.eager_host_s`):
there the host dispatches each kernel, so a fused operator costs one dispatch and a routed-expert layer several.

Each rule below is the engines' code for the operator; every other operator is one launch. The counts follow
SGLang's model code (the engine whose eager pass calibrates the host time per launch, ``data/engines.json``
``eager_host_per_kernel_s``); vLLM and TensorRT-LLM fuse the same projections (vLLM ``QKVParallelLinear`` /
``MergedColumnParallelLinear``, vllm/model_executor/models/llama.py; TensorRT-LLM's PyTorch backend
``qkv_proj`` / ``gate_up_proj``, tensorrt_llm/_torch/modules/attention.py and gated_mlp.py). An activation
quantisation kernel before a quantised GEMM is not counted (a format's launch, not an operator's).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmath.ops.core import Builder
    from llmath.ops.table import Table

_LLAMA = (
    "https://github.com/sgl-project/sglang/blob/00239548f1cd1a06ca145a5447a86738090a48f1/"
    "python/sglang/srt/models/llama.py"
)
_FUSED_MOE = (
    "https://github.com/sgl-project/sglang/blob/006fc20223af95669cb7284d2a210d412443a2b4/"
    "python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py"
)

LAUNCHES: dict[str, dict[str, Any]] = {
    "kv_proj_with_q": {
        "value": 0.0,
        "source": f"{_LLAMA} (LlamaAttention: one QKVParallelLinear qkv_proj, split into q, k, v after the GEMM): "
        "a self-attention layer's K and V projections run inside the query projection's launch",
    },
    "up_with_gate": {
        "value": 0.0,
        "source": f"{_LLAMA} (LlamaMLP: one MergedColumnParallelLinear gate_up_proj, then SiluAndMul); "
        f"{_FUSED_MOE} (fused_experts: one fused_moe_kernel over the experts' w13 = gate and up): a gated FFN's "
        "up projection runs inside its gate projection's launch",
    },
    "residual_in_rmsnorm": {
        "value": 0.0,
        "source": f"{_LLAMA} (LlamaDecoderLayer: input_layernorm(hidden_states, residual) and "
        "post_attention_layernorm(hidden_states, residual), the final norm(hidden_states, residual): RMSNorm's "
        "fused add-and-norm kernel): a residual add before an RMSNorm runs inside the norm's launch",
    },
    "kv_a_with_q_a": {
        "value": 0.0,
        "source": "https://github.com/sgl-project/sglang/blob/3e4a39ee73308590c5c753108bdcb8d333f7f1c6/"
        "python/sglang/srt/models/deepseek_v2.py "
        "(DeepseekV2AttentionMLA: fused_qkv_a_proj_with_mqa, one GEMM for q_a_proj and kv_a_proj_with_mqa where "
        "q_lora_rank is set): MLA's compressed KV projection runs inside the query down-projection's launch",
    },
    "topk_with_token_sort": {
        "value": 3.0,
        "source": f"{_FUSED_MOE} (moe_align_block_size: sorted_ids.fill_ and the align kernel that sorts the "
        "routed tokens by expert, before the experts' first GEMM): the top-k selection, then 2 launches",
    },
    "expert_down_with_reduce": {
        "value": 2.0,
        "source": f"{_FUSED_MOE} (fused_experts: the w2 fused_moe_kernel, then moe_sum_reduce of each token's "
        "top-k outputs): the experts' down projection and the weighted sum back to token order",
    },
}


_TRT = "https://github.com/NVIDIA/TensorRT-LLM/blob"
_TRITON_MOE = (
    f"{_TRT}/00131d71bc53d0d342a63213c0efb28f9610f62d/tensorrt_llm/_torch/modules/fused_moe/fused_moe_triton.py"
)

# A routed-expert layer (the router GEMM, its top-k and routing, the experts) as a MoE kernel path launches it from
# Python in an eager pass, by the kernel a launcher picked (``EngineConfig.moe_kernel``): ``layer`` kernels, and
# ``ep_extra`` more where the experts are split over expert-parallel ranks. A path not listed keeps the operators'
# own counts (:data:`LAUNCHES`): TensorRT-LLM's CUTLASS, TRTLLM-Gen and DeepGEMM backends run the experts as one op
# whose kernels launch from C++.
MOE_PATH_LAUNCHES: dict[str, dict[str, Any]] = {
    "trtllm_triton_mxfp4": {
        "layer": 13.0,
        "ep_extra": 3.0,
        "source": f"{_TRITON_MOE} (TritonFusedMoE, TritonMXFP4FusedMoEMethod.apply; TensorRT-LLM's "
        "moe_config.backend TRITON over W4A16 MXFP4 experts, sm90) and "
        f"{_TRT}/050b6cb9/tensorrt_llm/_torch/models/modeling_gpt_oss.py (the layer's gate Linear): the router "
        "GEMM 1; TritonEPRouter routing 4 (triton_kernels topk's _topk_forward, routing_from_bitmatrix's "
        "_sum_bitmatrix_rows, _combined_routing_memset, _combined_routing_compute: triton-lang/triton pull "
        "request #7369, 'four obligatory kernel launches'); _maybe_pad_activation's F.pad to the k_alignment of "
        "128, called whatever the width, 2 (a fill and a copy); the first matmul_ogs, gather and SwiGLU fused, 1; "
        "the second, scatter fused, 5 (two zero-fills, _compute_writeback_idx, the GEMM, _finalize_matmul: "
        "triton_kernels matmul_ogs.py at the revision whose matmul_ogs calls _finalize_matmul). At EP > 1 "
        "TritonEPRouter.prune_routing_ep adds 3: _routing_shift_bitmatrix_range, _routing_clear_bitmatrix and "
        "compaction's _masked_compaction",
    },
}
_ROUTED_LAYER_OPS = ("moe.router", "moe.topk")  # and the routed experts, ``moe.experts.*``


def pass_launches(table: Table, moe_path: str = "", ep: int = 1) -> float:
    """Kernels an engine launches for one eager pass over ``table`` (:attr:`~llmath.ops.Table.launches`), each
    routed-expert layer (its ``moe.router``, ``moe.topk`` and ``moe.experts.*`` operators) counted as the MoE
    kernel path ``moe_path`` launches it (:data:`MOE_PATH_LAUNCHES`) under ``ep`` expert-parallel ranks; the
    table's own count for a path not listed there."""
    rule = MOE_PATH_LAUNCHES.get(moe_path)
    if rule is None:
        return table.launches
    routed = [op for op in table.ops if op.name in _ROUTED_LAYER_OPS or op.name.startswith("moe.experts.")]
    per_layer = rule["layer"] + (rule["ep_extra"] if ep > 1 else 0.0)
    return table.launches - sum(op.count * op.launches for op in routed) + table.routed_expert_layers * per_layer


def launched(b: Builder, rule: str) -> None:
    """The operator just added launches :data:`LAUNCHES` ``[rule]`` kernels per run."""
    b.ops[-1] = replace(b.ops[-1], launches=LAUNCHES[rule]["value"])


__all__ = ["LAUNCHES", "MOE_PATH_LAUNCHES", "launched", "pass_launches"]
