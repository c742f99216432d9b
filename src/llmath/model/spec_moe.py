"""A mixture of experts' widths and routing (:attr:`ModelSpec.moe`), in the FFN of the layers
:attr:`ModelSpec.layer_moe` marks.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmath.errors import SpecError
from llmath.model.spec_hyper import _positive


@dataclass(frozen=True)
class MoESpec:
    """Mixture of experts in the FFN of the layers marked ``moe`` in :attr:`ModelSpec.layer_moe`.

    ``d_ff_expert`` is each routed expert's hidden width; shared experts are always active and are
    stored as one FFN of width ``d_ff_shared`` (DeepSeek: ``n_shared_experts * moe_intermediate_size``).
    """

    n_experts: int
    top_k: int
    d_ff_expert: int
    d_ff_shared: int = 0
    shared_gate: bool = False  # Qwen2-MoE: sigmoid gate Linear(D, 1) on the shared expert
    router_bias: bool = False  # gpt-oss router Linear has a bias
    expert_bias: bool = False  # gpt-oss experts have biases on gate_up and down
    router_score_bias: bool = False  # ERNIE-4.5: e_score_correction_bias is a parameter (E per layer)
    dense_eager: bool = False  # Llama-4: transformers runs every expert on every token (scores scale them)
    output_norm: bool = False  # A.X K1: a norm (with weights) over each MoE block's output
    output_bias: bool = False  # JetMoE: one bias vector (D) added to each MoE block's output
    shared_bias: bool = False  # Nemotron-H: the shared expert's projections have biases (its mlp_bias)
    # LongCat-Flash: identity ("zero-computation") experts the router may pick besides the n_experts real ones;
    # a token routed to one costs no matmul. llmath runs top_k real experts per token (see ops/moe.py)
    zero_experts: int = 0
    # ZAYA: the router is an MLP of this hidden width R (D -> R with bias, an RMSNorm, two R x R GELU layers with
    # bias, R -> E + 1: the extra class is a skip expert), its R-wide state carried to the next layer's router
    router_mlp: int = 0
    # Nemotron-3 Super/Ultra (moe_latent_size): the routed experts read and write an L-wide latent, projected
    # D -> L before them and L -> D after (ops/moe.py routed_experts); 0: they work at the model width
    latent: int = 0
    # DeepSeek-V2/V3 (n_group): the router splits the experts into this many groups and picks each token's top-k
    # within its best topk_group groups (modeling_deepseek_v3.py DeepseekV3MoE.route_tokens_to_experts); 1: a
    # plain top-k over all experts. A kernel trait as well: FlashInfer's TensorRT-LLM MoE routes grouped top-k
    # with its DeepSeek-V3 routing method (hardware/moe_ep_token.py)
    expert_groups: int = 1

    @property
    def grouped_routing(self) -> bool:
        """Whether the router restricts each token's top-k to groups of experts (:attr:`expert_groups` > 1)."""
        return self.expert_groups > 1

    def validate(self, name: str) -> None:
        for f in ("n_experts", "top_k", "d_ff_expert"):
            _positive(name, f"moe.{f}", getattr(self, f))
        if self.top_k > self.n_experts:
            raise SpecError(
                f"{name!r}: moe.top_k={self.top_k} exceeds moe.n_experts={self.n_experts}; "
                "a token cannot be routed to more experts than exist"
            )
        if self.d_ff_shared < 0:
            raise SpecError(f"{name!r}: moe.d_ff_shared={self.d_ff_shared} must be >= 0")
        if self.router_mlp < 0:
            raise SpecError(f"{name!r}: moe.router_mlp={self.router_mlp} must be >= 0 (0: a linear router)")
        if self.latent < 0:
            raise SpecError(f"{name!r}: moe.latent={self.latent} must be >= 0 (0: experts at the model width)")
        if self.expert_groups < 1 or self.n_experts % self.expert_groups:
            raise SpecError(
                f"{name!r}: moe.expert_groups={self.expert_groups} must be >= 1 and divide moe.n_experts="
                f"{self.n_experts} (the router's n_group, the config class's default where a file omits it); "
                "set n_group in the config.json to a divisor of the experts (1: plain top-k)"
            )
        if self.zero_experts < 0:
            raise SpecError(f"{name!r}: moe.zero_experts={self.zero_experts} must be >= 0 (identity experts)")
