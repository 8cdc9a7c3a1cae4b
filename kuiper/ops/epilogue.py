"""An epilogue: the elementwise math the fusion pass gave a convolution or a Linear (kuiper/graph/fusion.py).

The pass merges such an op with the elementwise op (fused or single) that was its only
reader, where the backend's kernel for it says it can take one: the node gains that op's
outputs, its other inputs after the op's own, and params ``epilogue`` (the ElementwiseMath)
and ``epilogue_operand`` (where the op's result goes among the math's inputs).  Here the
math runs after the op, compiled by the backend exactly as the elementwise op would have
run it; a backend's kernel may run it while the output is in cache instead
(``compute_with_epilogue``: numba_kernels/conv.py per output plane, oneDNN as post-ops).

A Linear may instead take the math that read the two halves of its output (``torch.chunk(y, 2,
dim=-1)`` then ``silu(a) * b``: a gated linear unit, as in SwiGLU and GeGLU MLPs): then param
``epilogue_halves`` is true, the math has two inputs, the first half goes to ``epilogue_operand``
and the second to the other, and the op's output is half as wide.
"""

from __future__ import annotations

from ..errors import ShapeError
from .elementwise import ElementwiseMath, compile_shared, dtype_name, function_for


class WithEpilogue:
    """What an op with a constant weight (ConvNd, Linear) adds for an epilogue: reading it, running it
    after the op, the kernel hook.  Mixed in before the op's class, whose ``epilogue_extras`` (0
    there) counts the inputs the epilogue adds after the op's own."""

    def read_epilogue(self):
        """The fusion pass's ``epilogue`` (only on ops with a constant weight, with the kernel's consent),
        and its extra inputs."""
        epilogue = self.node.params.get("epilogue")
        self.epilogue = epilogue if isinstance(epilogue, ElementwiseMath) else None
        if self.epilogue is None:
            return
        if not self.weights_are_constant():
            raise self.error("an epilogue needs the op's weights as constants ('@weight')")
        self.epilogue_operand = self.int_param("epilogue_operand")
        if not 0 <= self.epilogue_operand < self.epilogue.arity:
            raise self.error(f"param 'epilogue_operand' must be below {self.epilogue.arity}, "
                             f"found {self.epilogue_operand}")
        self.epilogue_halves = self.bool_param("epilogue_halves", default=False)
        if self.epilogue_halves and self.epilogue.arity != 2:
            raise self.error(f"an epilogue of the output's halves reads two inputs, found {self.epilogue.arity}")
        self.epilogue_extras = 0 if self.epilogue_halves else self.epilogue.arity - 1
        self._epilogue_compiled: dict[tuple[str, ...], object] = {}

    def forward(self, *inputs):
        if self.epilogue is None:
            return super().forward(*inputs)
        # The op's own inputs, then the epilogue's: x alone where the weights are constants; x, weight (and
        # bias) where a kernel takes one-input epilogues on an op whose weights are inputs (a JAX conv).
        own = len(inputs) - self.epilogue_extras
        extras = inputs[own:]
        x = inputs[0]
        if own == 1 and self.backend.is_array(x):
            out = self.compute_with_epilogue(x, extras)
            if out is not None:
                return out
        return self.run_epilogue(super().forward(*inputs[:own]), extras)

    def weights_are_constant(self) -> bool:
        """Whether the op reads nothing but x at run time (its weights are in the file), so that the
        inputs after x are the epilogue's."""
        return "weight" in self.node.attrs

    def compute_with_epilogue(self, x, extras):
        """The op on x with the epilogue applied, where a kernel can fuse them; else None (then the
        epilogue runs after the op's own forward)."""
        return None

    def epilogue_arguments(self, out, extras) -> list:
        """The epilogue's inputs: the extras, with the op's result at its place (or its halves at theirs)."""
        if self.epilogue_halves:
            first, second = self.halves(out)
            return [first, second] if self.epilogue_operand == 0 else [second, first]
        arguments = list(extras)
        arguments.insert(self.epilogue_operand, out)
        return arguments

    def halves(self, out):
        """The two halves of ``out`` along its last dim, as ``torch.chunk(out, 2, dim=-1)`` cuts them."""
        width = out.shape[-1] if out.ndim else 0
        if width % 2:
            raise ShapeError(f"{self.node.describe()}: the halves of a last dim of {width} differ in size; "
                             "the math after torch.chunk reads two of one shape")
        return out[..., : width // 2], out[..., width // 2:]

    def compiled_epilogue(self, input_dtypes: tuple[str, ...]):
        """(Function, the backend's compiled callable) of the epilogue for these input dtypes, made once."""
        return self.cached(self._epilogue_compiled, input_dtypes, self._compile_epilogue, input_dtypes)

    def _compile_epilogue(self, input_dtypes: tuple[str, ...]):
        function = function_for(self.epilogue, input_dtypes)
        return function, compile_shared(self.backend, function)  # shared as fused ops share theirs

    def run_epilogue(self, out, extras):
        """The epilogue over the op's result ``out``, as the elementwise op it replaces ran it."""
        arguments = self.epilogue_arguments(out, extras)
        input_dtypes = tuple(map(dtype_name, arguments))
        function, run = self.compiled_epilogue(input_dtypes)
        # The result may go to ``out`` (this op's fresh array) when it has out's dtype and shape.
        result_fits = function.results[0].dtype == input_dtypes[self.epilogue_operand] and not self.epilogue_halves
        if result_fits and extras:
            shapes = [value.shape for value in arguments if self.backend.is_array(value)]
            result_fits = (all(shape == out.shape for shape in shapes)
                           or self.backend.native.broadcast_shapes(*shapes) == out.shape)
        result = run(*arguments, out=out) if result_fits else run(*arguments)
        if any(result is value for value in (arguments if self.epilogue_halves else extras)):
            result = self.xp.asarray(result, copy=True)  # the math simplified to an input: outputs are fresh
        return result
