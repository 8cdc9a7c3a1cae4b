"""Linear algebra: Linear (weights constant or inputs), matrix products, einsum.

Products follow ``xp.matmul``, whose rules (1-D operands promoted and the
added dim dropped again, batch dims broadcast) are PyTorch's torch.matmul
rules.  Operands come by keyword (``$input``, ``$other``, ``$mat1`` ...), so
they are looked up through ``node.input_keys`` rather than by position.
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op
from .epilogue import WithEpilogue
from .einsum_matmul import matmul_plan, run_plan


def _shape(value) -> tuple:
    return tuple(getattr(value, "shape", ()))


class KeyedInputs(Op):
    """An op whose inputs are bound to ``$key`` names; ``keys`` lists them in calling order."""

    keys: tuple[str, ...] = ()

    def setup(self):
        self.require_inputs(len(self.keys))
        # Position of each keyword's operand on the op line (unkeyed files: line order).
        self.order = [self.input_index(key, default=i) for i, key in enumerate(self.keys)]
        if sorted(self.order) != list(range(len(self.keys))):
            raise self.error(f"expects inputs bound to {', '.join('$' + k for k in self.keys)}")
        self.read_params()

    def read_params(self) -> None:
        """Read this op's params (none by default)."""

    def operands(self, inputs):
        return [inputs[i] for i in self.order]

    def check_rank(self, name: str, value, ranks: tuple[int, ...]) -> None:
        if getattr(value, "ndim", None) not in ranks:
            wanted = " or ".join(f"{r}-D" for r in ranks)
            raise ShapeError(f"{self.node.describe()}: ${name} must be {wanted}, found shape {_shape(value)}")


class LinearProjection(Op):
    """y = x @ W^T + b over the last dim; any leading dims (rank 1, 2, 3 ...) pass through.

    W is the constant ``@weight``, or, for a weight shared with another layer (GPT-2 ties its
    lm_head to the token embedding: PNNX writes ``nn.Linear lm_head 2 1 <weight> <x>``), a
    second input: the one bound to ``$weight``, else the one of shape (out_features, in_features).
    """

    fresh_output = True  # x @ W^T (+ b) is a new array
    epilogue_extras = 0  # inputs after x, for an epilogue (epilogue.py; only with a constant weight)

    def setup(self):
        if self.epilogue_extras:
            self.require_inputs(1 + self.epilogue_extras)  # x, then the epilogue's; the weight is constant
        else:
            self.require_inputs(1, 2)
        self.weight_t = None
        if len(self.node.inputs) == 2 and not self.epilogue_extras:
            self.shape = (self.int_param("out_features"), self.int_param("in_features"))
        else:
            weight = self.node.attrs.get("weight")
            if weight is None or weight.ndim != 2:
                raise self.error("needs a 2-D weight '@weight' (out_features, in_features)")
            for key, actual in (("out_features", weight.shape[0]), ("in_features", weight.shape[1])):
                if self.has_param(key) and self.int_param(key) != actual:
                    raise self.error(f"param '{key}'={self.int_param(key)} contradicts @weight of shape {weight.shape}")
            self.shape = tuple(weight.shape)
            # Transposed once here so forward is a plain x @ W^T without a per-call transpose.
            self.weight_t = self.xp.permute_dims(self.weight("weight", aligned=True), (1, 0))
        self.in_features = self.shape[1]
        self.bias = self.weight("bias", required=self.bool_param("bias", default="bias" in self.node.attrs))

    def forward(self, *inputs):
        if self.weight_t is None:
            x, weight = self.input_and_shared_weight(inputs)
            weight_t = self.xp.permute_dims(weight, (1, 0))
        else:
            (x,), weight_t = inputs, self.weight_t
        if x.shape[-1] != self.in_features:
            raise ShapeError(
                f"{self.node.describe()}: expected last dim {self.in_features}, found input shape {tuple(x.shape)}"
            )
        out = matmul_last_dim(self.xp, x, weight_t)
        if self.bias is not None:
            if out.dtype == self.bias.dtype and out.ndim >= 1:
                out += self.bias  # out is a fresh array
            else:
                out = out + self.bias
        return out

    def input_and_shared_weight(self, inputs):
        """(x, W) from two inputs: W is bound to ``$weight``, or the only one shaped (out, in)."""
        weight_at = self.input_index("weight")
        if weight_at is None:
            fits = [position for position, value in enumerate(inputs) if _shape(value) == self.shape]
            if len(fits) != 1:
                raise ShapeError(
                    f"{self.node.describe()}: expected one input of weight shape {self.shape} beside the data "
                    f"input, found shapes {[_shape(value) for value in inputs]} (bind the weight to $weight)"
                )
            (weight_at,) = fits
        return inputs[1 - weight_at], inputs[weight_at]


class Linear(WithEpilogue, LinearProjection):
    """nn.Linear; with a constant weight it may carry the elementwise math that read it as an epilogue."""

    types = ("Linear",)

    def setup(self):
        self.read_epilogue()
        super().setup()


def matmul_last_dim(xp, x, matrix):
    """x @ matrix over x's last dim as ONE 2-D GEMM: (..., K) -> (..., N).

    xp.matmul on a (B, T, K) input runs B separate small GEMMs (NumPy loops over the
    leading dims), which BLAS cannot spread over its threads; folding the leading dims
    into the rows gives one large GEMM.  Reshaping copies only a non-contiguous x.
    """
    if x.ndim <= 2:
        return xp.matmul(x, matrix)
    rows = xp.reshape(x, (-1, x.shape[-1]))
    return xp.reshape(xp.matmul(rows, matrix), tuple(x.shape[:-1]) + (matrix.shape[-1],))


class FunctionalLinear(Op):
    """F.linear(input, weight, bias): weight and bias are inputs (``$weight``, ``$bias``) or
    weights (``@weight``, ``@bias``); ``bias=None`` means no bias."""

    types = ("LinearInputs",)

    def setup(self):
        keys = self.node.input_keys
        self.input_at = self.input_index("input", default=0)
        self.weight_at = self.input_index("weight")
        self.bias_at = self.input_index("bias")
        if self.weight_at is None and len(keys) >= 2 and keys[1] is None:
            self.weight_at = 1  # unkeyed: (input, weight[, bias]) in order
            self.bias_at = 2 if len(keys) >= 3 else None
        self.weight_value = None
        if self.weight_at is None:
            if "weight" not in self.node.attrs:
                raise self.error("needs a weight: an input bound to $weight or a '@weight' attribute")
            self.weight_value = self.weight("weight", aligned=True)
        self.bias_value = None
        if self.bias_at is None and "bias" in self.node.attrs:
            self.bias_value = self.weight("bias")
        used = {self.input_at, self.weight_at, self.bias_at} - {None}
        self.require_inputs(len(used))

    def forward(self, *inputs):
        xp = self.xp
        x = inputs[self.input_at]
        weight = self.weight_value if self.weight_at is None else inputs[self.weight_at]
        bias = self.bias_value if self.bias_at is None else inputs[self.bias_at]
        if getattr(weight, "ndim", None) not in (1, 2):
            raise ShapeError(f"{self.node.describe()}: weight must be 1-D or 2-D, found shape {_shape(weight)}")
        if x.shape[-1] != weight.shape[-1]:
            raise ShapeError(
                f"{self.node.describe()}: input's last dim {x.shape[-1]} does not match weight shape "
                f"{_shape(weight)}"
            )
        weight_t = xp.permute_dims(weight, (1, 0)) if weight.ndim == 2 else weight
        out = matmul_last_dim(xp, x, weight_t) if weight.ndim == 2 else xp.matmul(x, weight_t)
        if bias is not None:
            out = out + bias
        return out


class MatMul(KeyedInputs):
    """torch.matmul and the canonical MatMul: 1-D and N-D operands, batch dims broadcast."""

    types = ("MatMul",)
    keys = ("input", "other")

    def forward(self, *inputs):
        a, b = self.operands(inputs)
        if getattr(a, "ndim", 0) == 0 or getattr(b, "ndim", 0) == 0:
            raise ShapeError(
                f"{self.node.describe()}: both operands need at least 1 dim, found {_shape(a)} and {_shape(b)}"
            )
        return self.xp.matmul(a, b)


class MM(KeyedInputs):
    """torch.mm (2-D @ 2-D) and torch.bmm (3-D @ 3-D, same batch)."""

    types = ("MatrixProduct",)
    keys = ("input", "mat2")

    def read_params(self):
        self.rank = self.int_param("rank", default=2)
        if self.rank not in (2, 3):
            raise self.unsupported("rank", self.rank, [2, 3])

    def forward(self, *inputs):
        a, b = self.operands(inputs)
        self.check_rank("input", a, (self.rank,))
        self.check_rank("mat2", b, (self.rank,))
        return self.xp.matmul(a, b)


class MV(KeyedInputs):
    """torch.mv: matrix @ vector."""

    types = ("MatVec",)
    keys = ("input", "vec")

    def forward(self, *inputs):
        a, v = self.operands(inputs)
        self.check_rank("input", a, (2,))
        self.check_rank("vec", v, (1,))
        return self.xp.matmul(a, v)


class AddMM(KeyedInputs):
    """torch.addmm: beta * input + alpha * (mat1 @ mat2); torch.baddbmm the batched (3-D) form.

    As in PyTorch, beta == 0 ignores ``input`` entirely (NaN in it does not spread).
    """

    types = ("AddMatrixProduct",)
    keys = ("input", "mat1", "mat2")

    def read_params(self):
        self.batched = self.bool_param("batched", default=False)
        self.beta = self.float_param("beta", default=1.0)
        self.alpha = self.float_param("alpha", default=1.0)

    def forward(self, *inputs):
        bias, a, b = self.operands(inputs)
        rank = 3 if self.batched else 2
        self.check_rank(self.keys[1], a, (rank,))
        self.check_rank(self.keys[2], b, (rank,))
        product = self.xp.matmul(a, b)
        if self.alpha != 1.0:
            product = product * self.alpha
        if self.beta == 0.0:
            return product
        return product + (bias if self.beta == 1.0 else bias * self.beta)


class Einsum(Op):
    """torch.einsum(equation, *operands): batched matrix products as one matmul
    (kuiper/ops/einsum_matmul.py), everything else via the backend's einsum."""

    types = ("Einsum",)

    def setup(self):
        if not self.node.inputs:
            raise self.error("expects at least one operand")
        equation = self.str_param("equation")
        self.equation = equation.replace(" ", "")
        operands = self.equation.split("->")[0].split(",")
        if len(operands) != len(self.node.inputs):
            raise self.error(
                f"equation '{equation}' names {len(operands)} operand(s), the file gives {len(self.node.inputs)}"
            )
        self.plan = matmul_plan(self.equation)

    def forward(self, *operands):
        if self.plan is not None:
            product = run_plan(self.xp, self.plan, *operands)
            if product is not None:
                return product
        return self.backend.einsum(self.equation, *operands)


OPS = [Linear, FunctionalLinear, MatMul, MM, MV, AddMM, Einsum]
