"""Single ops on realistic shapes: every conv variant, pooling, activations, fused vs unfused chains.

The models are PNNX files written at setup time from the case tables in
``opmodels`` (NumPy random weights; no torch, no network).  An op type kuiper
does not register (yet) makes its benchmark skip with the reason.

A lone op's time includes the allocator: large temporaries that glibc maps and
unmaps on every call cost page faults that the same op inside a bigger model may
not pay (docs/performance.md shows a 3x3 conv at 4.7 ms alone, 1.75 ms in ResNet-18).
"""

from __future__ import annotations

from . import opmodels
from .common import CACHE, available_backends, device_inputs, load_or_skip, run_once

BACKENDS = available_backends()


class _SingleOp:
    """One op type's cases (``params``) on every backend: a subclass names its ``kind`` and cases."""

    kind = ""
    param_names = ("case", "backend")
    number = 1  # each sample is one call; asv picks the repeat count
    warmup_time = 0.2

    def setup(self, case, backend, *rest):
        param = opmodels.write_case(self.kind, case, CACHE)
        self.model = load_or_skip(param, backend, fuse=rest[0] if rest else True)
        self.inputs = device_inputs(self.model, batch=1)
        run_once(self.model, self.inputs)  # first call compiles expressions and fills caches

    def time_forward(self, case, backend, *rest):
        run_once(self.model, self.inputs)


class Conv(_SingleOp):
    """nn.Conv2d 3x3 s1/s2, 1x1, depthwise, grouped, dilated, and nn.ConvTranspose2d, on 1x64x56x56."""

    kind = "conv"
    params = (list(opmodels.CONV_CASES), BACKENDS)


class Pooling(_SingleOp):
    kind = "pool"
    params = (list(opmodels.POOL_CASES), BACKENDS)


class Activation(_SingleOp):
    """One activation op on 1x64x112x112 (800k elements)."""

    kind = "activation"
    params = (list(opmodels.ACTIVATION_CASES), BACKENDS)


class ElementwiseChain(_SingleOp):
    """Chains of pnnx.Expression and ReLUs: fused into one expression (default) or run op by op."""

    kind = "chain"
    params = (list(opmodels.CHAIN_CASES), BACKENDS, [True, False])
    param_names = ("case", "backend", "fuse")
