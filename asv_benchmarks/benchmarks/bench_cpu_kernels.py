"""The compiled CPU kernels (kuiper.numba_kernels) against the reference ops they replace, on one op each.

``path`` is "compiled" (the numpy backend's kernel override) or "reference" (the
op class in kuiper.ops); both run on the numpy backend with the default threads
(numba and OpenBLAS each use every core unless OMP_NUM_THREADS says otherwise).
Shapes are the layers where ResNet-18, MobileNetV2, YOLOv5 and ViT-style models
spend their time.  Skips with the reason when numba is not installed.
"""

from __future__ import annotations

import numpy as np

CONV_CASES = {
    # name: (input shape, out channels, kernel, stride, padding, groups)
    "depthwise_3x3_s1_144x56x56": ((1, 144, 56, 56), 144, 3, 1, 1, 144),
    "depthwise_3x3_s2_96x112x112": ((1, 96, 112, 112), 96, 3, 2, 1, 96),
    "winograd_3x3_64x56x56": ((1, 64, 56, 56), 64, 3, 1, 1, 1),
    "winograd_3x3_64x56x56_batch8": ((8, 64, 56, 56), 64, 3, 1, 1, 1),
    "im2col_7x7_s2_stem_3x224x224": ((1, 3, 224, 224), 64, 7, 2, 3, 1),
    "im2col_3x3_s2_64x56x56": ((1, 64, 56, 56), 128, 3, 2, 1, 1),
}
OTHER_CASES = {
    "maxpool_3x3_s2_64x112x112": ("nn.MaxPool2d", (1, 64, 112, 112),
                                  {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}),
    "maxpool_5x5_s1_128x20x20": ("nn.MaxPool2d", (1, 128, 20, 20),
                                 {"kernel_size": [5, 5], "stride": [1, 1], "padding": [2, 2]}),
    "avgpool_3x3_s1_64x56x56": ("nn.AvgPool2d", (1, 64, 56, 56),
                                {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1], "count_include_pad": False}),
    "layernorm_3136x96": ("nn.LayerNorm", (1, 3136, 96), {"normalized_shape": [96], "eps": 1e-6}),
}
ELEMENTWISE_CASES = {
    # name: (composite in kuiper.ir.composites, arity, shape)
    "gelu_1x197x768": ("gelu", 1, (1, 197, 768)),
    "gelu_1x3136x256": ("gelu", 1, (1, 3136, 256)),
    "silu_1x64x160x160": ("silu", 1, (1, 64, 160, 160)),
    "add_relu_1x64x56x56": ("add_relu", 2, (1, 64, 56, 56)),
    # tanh, log1p and expm1 on the interpreter's own vector loops (libm's were scalar calls)
    "gelu_tanh_1x197x768": ("gelu_tanh", 1, (1, 197, 768)),
    "mish_1x64x80x80": ("mish", 1, (1, 64, 80, 80)),
    "elu_1x64x80x80": ("elu", 1, (1, 64, 80, 80)),
}
PATHS = ["compiled", "reference"]


def _classes(op_type, path):
    """The op class for PNNX's ``op_type`` (translated to its canonical type), reference or compiled."""
    from kuiper.formats.pnnx_ops import PNNX_OPS
    from kuiper.numba_kernels import kernels
    from kuiper.plugins import op_registry

    op_type = PNNX_OPS[op_type].canonical
    if path == "reference":
        return op_registry()[op_type].obj
    compiled = kernels().get(op_type)
    if compiled is None:
        raise NotImplementedError(f"no compiled kernel for {op_type} (is numba installed?)")
    return compiled


def _node(op_type, params, attrs=None):
    """A node of PNNX's ``op_type`` as the PNNX frontend hands it on (canonical type and params)."""
    from kuiper.formats.pnnx_ops import translate
    from kuiper.model_ir import OpNode

    return translate(OpNode(op_type, "op", ["x"], ["y"], params=params, attrs=attrs or {}))


class CompiledConv:
    params = (list(CONV_CASES), PATHS)
    param_names = ("case", "path")
    warmup_time = 0.2

    def setup(self, case, path):
        from kuiper.backends import get_backend

        shape, out_channels, kernel, stride, padding, groups = CONV_CASES[case]
        rng = np.random.default_rng(0)
        weight = rng.standard_normal((out_channels, shape[1] // groups, kernel, kernel)).astype(np.float32)
        node = _node("nn.Conv2d", {"stride": [stride, stride], "padding": [padding, padding], "groups": groups, "bias": True},
                     {"weight": weight, "bias": rng.standard_normal(out_channels).astype(np.float32)})
        self.op = _classes("nn.Conv2d", path)(node, get_backend("numpy"))
        self.x = rng.standard_normal(shape).astype(np.float32)
        self.op.forward(self.x)  # compiles (or loads from numba's cache), prepares Winograd weights

    def time_forward(self, case, path):
        self.op.forward(self.x)


SMALL_CONV_CASES = {
    # name: (PNNX op type, input shape, out channels, kernel, stride, padding, dilation): the convs of
    # small audio and toy nets, under 1 M multiply-adds (oneDNN's GEMM kernel on plain arrays)
    "conv1d_k3_d2_32x200_tcn": ("nn.Conv1d", (1, 32, 200), 32, 3, 1, 4, 2),
    "conv1d_k3_64x7_m5": ("nn.Conv1d", (1, 64, 7), 64, 3, 1, 0, 1),
    "conv2d_3x3_s2_16x14x14": ("nn.Conv2d", (1, 16, 14, 14), 32, 3, 2, 1, 1),
}


class SmallConvs:
    """Small convolutions, where a call's fixed costs (reorders, a oneDNN call, Python) are most of it:
    "compiled" is the kernel plugin's class (oneDNN on plain layouts, docs/performance.md "Small
    models: convolutions, crops and per-call costs")."""

    params = (list(SMALL_CONV_CASES), PATHS)
    param_names = ("case", "path")
    warmup_time = 0.2

    def setup(self, case, path):
        from kuiper.backends import get_backend

        op_type, shape, out_channels, kernel, stride, padding, dilation = SMALL_CONV_CASES[case]
        spatial = len(shape) - 2
        rng = np.random.default_rng(0)
        weight = rng.standard_normal((out_channels, shape[1]) + (kernel,) * spatial).astype(np.float32)
        node = _node(op_type, {"stride": [stride] * spatial, "padding": [padding] * spatial,
                               "dilation": [dilation] * spatial, "bias": True},
                     {"weight": weight, "bias": rng.standard_normal(out_channels).astype(np.float32)})
        self.op = _classes(op_type, path)(node, get_backend("numpy"))
        self.x = rng.standard_normal(shape).astype(np.float32)
        self.op.forward(self.x)

    def time_forward(self, case, path):
        self.op.forward(self.x)


class CompiledOther:
    params = (list(OTHER_CASES), PATHS)
    param_names = ("case", "path")
    warmup_time = 0.2

    def setup(self, case, path):
        from kuiper.backends import get_backend

        op_type, shape, params = OTHER_CASES[case]
        self.op = _classes(op_type, path)(_node(op_type, params), get_backend("numpy"))
        self.x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        self.op.forward(self.x)

    def time_forward(self, case, path):
        self.op.forward(self.x)


class Softmax:
    """Softmax over the last axis of attention scores: the NumPy backend's compiled row loop
    ("compiled") against the generic array-API softmax every backend inherits ("reference")."""

    params = (["8x197x197", "3x3136x49"], PATHS)
    param_names = ("case", "path")

    def setup(self, case, path):
        from kuiper.backends import get_backend
        from kuiper.backends.base import Backend

        backend = get_backend("numpy")
        shape = tuple(int(d) for d in case.split("x"))
        self.scores = np.random.default_rng(0).standard_normal((1, *shape)).astype(np.float32)
        self.work = np.empty_like(self.scores)
        self.softmax = backend.softmax_in_place if path == "compiled" else (
            lambda x, axis: Backend.softmax_in_place(backend, x, axis))
        self.time_softmax(case, path)  # loads the kernel (numba's cache) outside the timing

    def time_softmax(self, case, path):
        np.copyto(self.work, self.scores)
        self.softmax(self.work, -1)


class FusedElementwise:
    """A fused elementwise program: the compiled interpreter ("compiled", the NumPy backend's
    compile_elementwise) against the NumPy evaluation of the same IR ("reference")."""

    params = (list(ELEMENTWISE_CASES), PATHS)
    param_names = ("case", "path")

    def setup(self, case, path):
        from kuiper.ir import composites
        from kuiper.ir.codegen_numpy import compile_elementwise
        from kuiper.ops.elementwise import ElementwiseMath, function_for

        name, arity, shape = ELEMENTWISE_CASES[case]
        build = (lambda a, b: composites.relu(a + b)) if name == "add_relu" else getattr(composites, name)
        function = function_for(ElementwiseMath(build, arity), ("float32",) * arity)
        if path == "compiled":
            from kuiper.numba_kernels import available
            from kuiper.numba_kernels.elementwise import CompiledElementwise

            if not available():
                raise NotImplementedError("numba is not installed")
            self.run = CompiledElementwise(function)
        else:
            self.run = compile_elementwise(function)
        rng = np.random.default_rng(0)
        self.inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(arity)]
        self.run(*self.inputs)

    def time_evaluate(self, case, path):
        self.run(*self.inputs)


TRANSFORMER_CASES = {
    # name: (PNNX op type, input shapes, params, attrs): ViT-Ti's layers, where transformers spend their time
    "linear_197x192x768": ("nn.Linear", [(1, 197, 192)], {"bias": True},
                           {"weight": (768, 192), "bias": (768,)}),
    "linear_3136x96x384": ("nn.Linear", [(1, 56, 56, 96)], {"bias": True},
                           {"weight": (384, 96), "bias": (384,)}),
    "sdpa_3x197x64": ("F.scaled_dot_product_attention", [(1, 3, 197, 64)] * 3, {}, {}),
    "layernorm_197x768": ("nn.LayerNorm", [(1, 197, 768)], {"normalized_shape": [768], "eps": 1e-6},
                          {"weight": (768,), "bias": (768,)}),
    # products of two run-time arrays (XLA's dot with its weight as an operand, attention written out)
    "matmul_197x192x576": ("torch.matmul", [(197, 192), (192, 576)], {}, {}),
    "bmm_3x197x64x197": ("torch.bmm", [(3, 197, 64), (3, 64, 197)], {}, {}),
}


class TransformerOps:
    """Linear, attention, layer norm and matrix products: "compiled" is the kernel plugin's class (oneDNN
    where it is installed, docs/performance.md "Linear layers, attention and layer norms on oneDNN" and
    "One OpenMP pool")."""

    params = (list(TRANSFORMER_CASES), PATHS)
    param_names = ("case", "path")
    warmup_time = 0.2

    def setup(self, case, path):
        from kuiper.backends import get_backend

        op_type, shapes, params, attrs = TRANSFORMER_CASES[case]
        rng = np.random.default_rng(0)
        arrays = {name: (rng.standard_normal(shape) / 10).astype(np.float32) for name, shape in attrs.items()}
        node = _node(op_type, params, arrays)
        node.inputs = [f"x{i}" for i in range(len(shapes))]
        self.op = _classes(op_type, path)(node, get_backend("numpy"))
        self.inputs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
        self.op.forward(*self.inputs)

    def time_forward(self, case, path):
        self.op.forward(*self.inputs)


class LinearND:
    """nn.Linear on a (1, 56, 56, 96) NHWC input (ConvNeXt's MLP): one 2-D GEMM."""

    def setup(self):
        from kuiper.backends import get_backend
        from kuiper.ops.linear import Linear

        rng = np.random.default_rng(0)
        weight = rng.standard_normal((384, 96)).astype(np.float32)
        node = _node("nn.Linear", {"bias": True}, {"weight": weight, "bias": np.zeros(384, np.float32)})
        self.op = Linear(node, get_backend("numpy"))
        self.x = rng.standard_normal((1, 56, 56, 96)).astype(np.float32)

    def time_forward(self):
        self.op.forward(self.x)
