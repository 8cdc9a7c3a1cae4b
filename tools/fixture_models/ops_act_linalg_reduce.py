"""Activations, linear algebra, reductions and comparisons.

Each fixture groups one family of ops and returns every op's result as its own
output (a tuple: prim::TupleConstruct), so a wrong op shows up as one wrong
output and the ops are not hidden inside a pnnx.Expression.  Inputs are
standard normal; params are chosen so thresholds (hardtanh bounds, softplus
threshold, shrink lambdas) fall inside that range.

Every input's dim 0 is replaced by the batch size in the reference data, so
operands that must keep their size (a weight matrix, a vector) are module
parameters (pnnx.Attribute), never inputs.
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import Fn, spec


class Branches(nn.Module):
    """Apply named submodules to the same input; one output each (names stay readable in pnnx)."""

    def __init__(self, **modules: nn.Module):
        super().__init__()
        for name, module in modules.items():
            setattr(self, name, module)
        self.names = list(modules)

    def forward(self, x):
        return tuple(getattr(self, name)(x) for name in self.names)


# -- activations -----------------------------------------------------------------------


def _pointwise_nn():
    return Branches(
        relu6=nn.ReLU6(), leaky=nn.LeakyReLU(0.2), elu=nn.ELU(0.7), selu=nn.SELU(), celu=nn.CELU(1.3),
        gelu=nn.GELU(), gelu_tanh=nn.GELU(approximate="tanh"), silu=nn.SiLU(), mish=nn.Mish(),
        sigmoid=nn.Sigmoid(), tanh=nn.Tanh(), hardswish=nn.Hardswish(), hardsigmoid=nn.Hardsigmoid(),
        hardtanh=nn.Hardtanh(-0.5, 0.7), softplus=nn.Softplus(2.0, 1.0),
    )


def _pointwise_functional(x):
    return (
        F.relu6(x), F.leaky_relu(x, 0.1), F.elu(x), F.selu(x), F.celu(x, 0.3),
        F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.mish(x),
        F.hardswish(x), F.hardsigmoid(x), F.hardtanh(x, -0.3, 0.6), F.softplus(x),
        F.softplus(x, beta=2.0, threshold=1.5), torch.sigmoid(x), torch.tanh(x), F.logsigmoid(x),
    )


def _shrinks():
    return Branches(
        logsigmoid=nn.LogSigmoid(), softsign=nn.Softsign(), tanhshrink=nn.Tanhshrink(),
        hardshrink=nn.Hardshrink(0.3), softshrink=nn.Softshrink(0.2), threshold=nn.Threshold(0.1, -2.0),
    )


class PReLUs(nn.Module):
    """Per-channel PReLU (nn.PReLU @weight) and a single-slope one (pnnx writes nn.LeakyReLU)."""

    def __init__(self, channels: int = 3):
        super().__init__()
        self.per_channel = nn.PReLU(channels)
        self.single = nn.PReLU()
        with torch.no_grad():  # default slopes are all 0.25: make the channels differ
            self.per_channel.weight.copy_(torch.linspace(-0.5, 0.8, channels))
            self.single.weight.fill_(0.4)

    def forward(self, x):
        return self.per_channel(x), self.single(x)


def _softmax_rank4():
    return Branches(
        softmax_d0=nn.Softmax(0), softmax_d1=nn.Softmax(1), softmax_dm1=nn.Softmax(-1),
        log_softmax_d0=nn.LogSoftmax(0), log_softmax_dm3=nn.LogSoftmax(-3), softmin_dm2=nn.Softmin(-2),
        softmax2d=nn.Softmax2d(),
    )


def _softmax_rank3(x):
    return (
        F.softmax(x, 0), F.softmax(x, 1), F.softmax(x, -1), torch.softmax(x, -2),
        F.log_softmax(x, 0), F.log_softmax(x, dim=1), torch.log_softmax(x, -1),
        F.softmin(x, 2), F.softmin(x, dim=-3),
    )


def _clamp(x, low, high):
    return (
        torch.clamp(x, min=-0.5), torch.clamp(x, max=0.3), torch.clamp(x, -0.2, 0.4),
        torch.clamp(x, min=float("-inf"), max=0.1), x.clamp(0.1, float("inf")),
        torch.clamp(x, min=low), torch.clamp(x, low, high),
    )


class Chains(nn.Module):
    """Chains of elementwise activations whose middle results nobody else reads, so the
    graph's fusion pass folds each chain into one expression (their elementwise_expression)."""

    def __init__(self):
        super().__init__()
        self.gelu_tanh, self.hardswish, self.leaky = nn.GELU(approximate="tanh"), nn.Hardswish(), nn.LeakyReLU(0.1)
        self.elu, self.softplus, self.mish, self.selu = nn.ELU(0.5), nn.Softplus(2.0, 1.0), nn.Mish(), nn.SELU()
        self.gelu, self.hardtanh, self.celu, self.hardsigmoid = nn.GELU(), nn.Hardtanh(-0.4, 0.9), nn.CELU(0.7), \
            nn.Hardsigmoid()
        self.threshold, self.softshrink, self.logsigmoid = nn.Threshold(0.1, -1.0), nn.Softshrink(0.2), nn.LogSigmoid()
        self.prelu = nn.PReLU()
        with torch.no_grad():
            self.prelu.weight.fill_(-0.3)

    def forward(self, x, y):
        a = torch.clamp(self.leaky(self.hardswish(self.gelu_tanh(x * 2.0))), -0.5, 0.8)
        b = self.selu(self.mish(self.softplus(self.elu(x))))
        c = self.hardsigmoid(self.celu(self.hardtanh(torch.sigmoid(self.gelu(x)))))
        d = self.logsigmoid(self.softshrink(self.threshold(F.silu(torch.tanh(F.relu6(x))))))
        e = torch.where(x > y, self.prelu(x), F.softsign(y))
        f = torch.clamp(F.tanhshrink(F.hardshrink(y, 0.3)), min=-0.2)
        return a, b, c, d, e, f


# -- linear algebra ------------------------------------------------------------------------


class Linears(nn.Module):
    """nn.Linear with and without bias on a rank-3 input (rank 4: see matmul_broadcast)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.fc_nobias = nn.Linear(6, 3, bias=False)

    def forward(self, x):
        return self.fc(x), self.fc_nobias(x)


def _functional_linear(x, weight, bias):
    # weight (B, 6) and bias (B,): the batch is the out_features, so any batch is valid.
    return F.linear(x, weight, bias), F.linear(x, weight)


class MatMuls(nn.Module):
    """torch.matmul: N-D with broadcast batch dims, N-D @ 1-D, 1-D @ N-D; N-D @ a 2-D
    parameter, which pnnx rewrites as nn.Linear on a rank-4 input."""

    def __init__(self):
        super().__init__()
        self.vec = nn.Parameter(torch.randn(4))
        self.mat = nn.Parameter(torch.randn(5, 2))

    def forward(self, a, b):
        # a (B, 2, 3, 4), b (B, 1, 4, 5): batch dims (B, 2) and (B, 1) broadcast
        ab = torch.matmul(a, b)
        return ab, torch.matmul(a, self.vec), torch.matmul(self.vec, b), torch.matmul(ab, self.mat)


class Products(nn.Module):
    """torch.mm / bmm / addmm / baddbmm / mv / einsum."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 5))
        self.v = nn.Parameter(torch.randn(4))

    def forward(self, a, b, c, m, n):
        # a (B, 3, 4), b (B, 4, 5), c (B, 3, 5), m (B, 4), n (B, 5)
        return (
            torch.mm(m, self.w),
            torch.bmm(a, b),
            torch.addmm(n, m, self.w, beta=0.5, alpha=2.0),
            torch.addmm(n, m, self.w),
            torch.baddbmm(c, a, b, beta=-1.5, alpha=0.25),
            torch.mv(m, self.v),
            torch.einsum("bij,bjk->bik", a, b),
            torch.einsum("bij->bj", a),
            torch.einsum("bij,j->bi", a, self.v),
        )


# -- reductions --------------------------------------------------------------------------------


# Reductions over everything give 0-d tensors.  The reference .npz stores a 0-d output
# as shape (1,), so 0-d results are passed through torch.where (broadcast against x)
# rather than returned directly.


def _sum_mean_prod(x):
    return (
        torch.mean(x, dim=1), x.mean((1, -1), keepdim=True), torch.sum(x, -2),
        torch.prod(x, 1, keepdim=True), torch.prod(x, -1), torch.sum(x, (0, 2, 3), keepdim=True),
        torch.mean(x, (-1, -2)), torch.where(x > 0, x.sum(), x.mean()),
    )


def _max_min(x):
    return (
        torch.max(x, 1), torch.min(x, dim=-1, keepdim=True), torch.where(x > 0, torch.max(x), torch.min(x)),
        torch.max(x, 2)[0], x.min(-3)[1],
        torch.amax(x, (0, 2)), torch.amin(x, -1, keepdim=True), torch.amax(x, 1),
        torch.argmax(x, 1), torch.argmin(x, -1, keepdim=True), torch.argmin(x, keepdim=True),
        torch.where(x > 0, torch.argmax(x), torch.argmin(x)),
    )


# torch.norm with p=inf is left out: pnnx writes `p=inf` into its generated Python,
# which fails with NameError, so the export self-check cannot pass (unit tests cover it).
def _norms(x):
    return (
        torch.norm(x, dim=1), torch.norm(x, p=1, dim=(1, 2), keepdim=True), torch.norm(x, p="fro", dim=(-1, -2)),
        torch.where(x > 0, torch.norm(x), x), torch.linalg.vector_norm(x, 2, -1), x.norm(p=3, dim=1),
        torch.logsumexp(x, -1), torch.logsumexp(x, (1, 2), keepdim=True),
        torch.var(x, 1), torch.std(x, (1, 2), keepdim=True, unbiased=False),
    )


# -- comparisons ---------------------------------------------------------------------------------


def _compare(x, y):
    # relu makes exact zeros, so eq/ne/ge/le see ties.
    rx, ry = F.relu(x), F.relu(y)
    return (
        torch.where(x > y, x, y), torch.where(x > 0, x, 0.5), torch.where(x < 0.3, 1.0, y),
        torch.where(x > 0, 1.0, 0.0), torch.where(y > 0, 2, x),
        torch.eq(rx, ry), torch.ne(rx, 0.0), torch.gt(x, y), torch.ge(rx, 0.0), torch.lt(x, y),
        torch.le(rx, ry), torch.le(x, -0.1),
    )


MODELS = {
    # --- activations
    "act_nn_pointwise": spec(_pointwise_nn, (1, 3, 4, 5),
                             description="nn.* elementwise activations, one output each: ReLU6, LeakyReLU, "
                                         "ELU, SELU, CELU, GELU (none and tanh), SiLU, Mish, Sigmoid, Tanh, "
                                         "Hardswish, Hardsigmoid, Hardtanh, Softplus(beta=2, threshold=1)"),
    "act_functional": spec(lambda: Fn(_pointwise_functional), (1, 3, 4, 5),
                           description="F.* / torch.* spellings of the elementwise activations"),
    "act_shrink_threshold": spec(_shrinks, (1, 3, 4, 5),
                                 description="LogSigmoid, Softsign, Tanhshrink, Hardshrink, Softshrink, Threshold"),
    "act_prelu": spec(PReLUs, (1, 3, 4, 5),
                      description="nn.PReLU(3) with distinct slopes (@weight) and nn.PReLU() "
                                  "(pnnx rewrites it as nn.LeakyReLU)"),
    "softmax_rank4": spec(_softmax_rank4, (1, 3, 4, 5),
                          description="nn.Softmax / LogSoftmax / Softmin on dims 0, 1, -1, -3, -2 "
                                      "and nn.Softmax2d of a rank-4 tensor"),
    "softmax_rank3": spec(lambda: Fn(_softmax_rank3), (1, 4, 6),
                          description="F.softmax / torch.softmax / log_softmax / softmin on dims 0, 1, 2, "
                                      "-1, -2, -3 of a rank-3 tensor"),
    "clamp_bounds": spec(lambda: Fn(_clamp), (1, 3, 4, 5), (1, 3, 4, 5), (1, 1, 4, 5),
                         description="torch.clamp with only min, only max, both, -inf/inf bounds, "
                                     "and tensor bounds ($min, $max inputs, broadcast)"),
    "act_chains_fused": spec(Chains, (1, 3, 4, 5), (1, 3, 4, 5),
                             description="chains of elementwise activations (and gt -> where) that the "
                                         "fusion pass folds into expressions"),
    # --- linear algebra
    "linear_rank3": spec(Linears, (1, 5, 6),
                         description="nn.Linear with and without bias on a rank-3 input"),
    "linear_functional": spec(lambda: Fn(_functional_linear), (2, 5, 6), (1, 6), (1,),
                              description="F.linear with weight and bias as inputs ($weight, $bias), "
                                          "and without bias"),
    "matmul_broadcast": spec(MatMuls, (1, 2, 3, 4), (1, 1, 4, 5),
                             description="torch.matmul: broadcast batch dims, N-D @ 1-D, 1-D @ N-D; "
                                         "nn.Linear (from matmul by a parameter) on a rank-4 input"),
    "matrix_products": spec(Products, (1, 3, 4), (1, 4, 5), (1, 3, 5), (1, 4), (1, 5),
                            description="torch.mm, bmm, addmm (beta/alpha), baddbmm, mv, einsum"),
    # --- reductions
    "reduce_sum_mean_prod": spec(lambda: Fn(_sum_mean_prod), (1, 3, 4, 5),
                                 description="torch.sum / mean / prod over int, list, negative dims, "
                                             "keepdim, and everything"),
    "reduce_max_min": spec(lambda: Fn(_max_min), (1, 3, 4, 5),
                           description="torch.max/min with dim (values + int64 indices) and without "
                                       "(0-d), amax/amin, argmax/argmin with and without dim"),
    "reduce_norm_lse": spec(lambda: Fn(_norms), (1, 3, 4, 5),
                            description="torch.norm p=2/1/fro/3 over dims and all, vector_norm, "
                                        "logsumexp, var, std"),
    # --- comparisons
    "compare_where": spec(lambda: Fn(_compare), (1, 3, 4, 5), (1, 3, 4, 5),
                          description="torch.where with tensor and number branches, torch.eq/ne/gt/ge/lt/le "
                                      "with tensor and number other"),
}
