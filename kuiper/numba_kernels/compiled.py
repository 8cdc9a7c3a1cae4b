"""What this plugin hands to kuiper once numba is known to be there: the compiled op classes and primitives.

One module that gathers them, so that ``kuiper.numba_kernels`` (the plugin module,
loaded at every plugin discovery) imports the op classes only when a NumPy-array backend
asks for them.  None of this imports numba: the loops' modules are imported when one first
runs (``runtime.KernelModule``).
"""

from __future__ import annotations

from . import (attention_native, batch_norm, concat_native, concat_nested, conv, conv_chain, conv_depthwise_pair,
               conv_native, conv_sequence, conv_transpose_native, dense_chain, grid_sample, layer_norm_native,
               linear_native, matmul_native, norm, pool_native, pooling, recurrent, resize_native)
from .elementwise import compile_elementwise
from .softmax_native import softmax_in_place
from .runtime import blas_threads

# A later module's class for an op type wins: the oneDNN classes extend the compiled ones before them.
MODULES = (attention_native, batch_norm, conv, conv_native, conv_transpose_native, concat_native, concat_nested,
           grid_sample, linear_native, matmul_native, pooling, pool_native, norm, layer_norm_native, recurrent,
           resize_native)
KERNELS: dict[str, type] = {op_type: cls for module in MODULES for cls in module.KERNELS for op_type in cls.types}

# Execution providers (kuiper/graph/providers.py): compiled runs of small layers, a 1x1 conv with its
# depthwise reader as one oneDNN call, and runs of oneDNN convs (those pairs among them) as one sequence.
PROVIDERS = {provider.name: provider for provider in (dense_chain.DenseChainProvider(), conv_chain.ConvChainProvider(),
                                                      conv_depthwise_pair.PointwiseDepthwiseProvider(),
                                                      conv_sequence.OneDnnSequenceProvider())}

PRIMITIVES = {"compile_elementwise": compile_elementwise, "softmax_in_place": softmax_in_place,
              "blas_threads": blas_threads}
