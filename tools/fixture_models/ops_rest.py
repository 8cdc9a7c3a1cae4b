"""The rest of pnnx's op set (issue 18): bitwise/logical ops, scans and selection,
in-place edits, windows (fold/unfold, lp pooling, grid sampling), pooling indices,
complex numbers and spectra.

Each fixture returns every op's result as its own output, so a wrong op shows up as
one wrong output.  Integer and bool outputs are stored with their dtype
(``exact_dtypes``) and compared exactly.  Complex results leave the model through
torch.view_as_real (the reference files hold real arrays only).
"""

import torch
import torch.nn.functional as F
from fixturelib import Fn, ModelSpec, spec
from torch import nn


def _spec(build, *shapes, **kw) -> ModelSpec:
    return spec(build, *shapes, exact_dtypes=True, **kw)


# ---------------------------------------------------------------- bitwise and logical


def bitwise(a, b):
    # a: int64 in [-40, 70), b: int64 shift amounts in [-3, 70) (negative and >= 64 shifts).
    # pnnx cannot take bool inputs, so the bool operand is computed.
    mask = b > 30
    return (
        torch.bitwise_and(a, b), torch.bitwise_or(a, 3), torch.bitwise_xor(a, b), torch.bitwise_not(a),
        torch.bitwise_left_shift(a, b), torch.bitwise_right_shift(a, b), torch.bitwise_right_shift(a, 2),
        torch.bitwise_left_shift(a, 62), torch.bitwise_and(mask, a > 0), torch.bitwise_not(mask),
        torch.bitwise_xor(mask, a < 0), torch.bitwise_or(mask, 6),
        torch.logical_and(a, b), torch.logical_or(a, mask), torch.logical_xor(a, b), torch.logical_not(a),
    )


def logical_float(x):
    # NaN-free floats: zero entries come from the relu
    r = torch.relu(x)
    return torch.logical_not(r), torch.logical_and(r, x), torch.logical_xor(r, x < -0.5)


# ---------------------------------------------------------------- scans and selection


def scans(x):
    # x: (B, 5, 4)
    v, i = torch.topk(x, 2, dim=1)
    v2, i2 = torch.topk(x, 3, dim=-1, largest=False)
    return (torch.cumsum(x, 1), torch.cumprod(x, dim=-1), torch.cumsum(x > 0, dim=-2), v, i, v2, i2,
            torch.masked_select(x, x > 0.5), torch.masked_select(x, x > 100.0), torch.masked_select(x, x[:, :1] < 0))


def diag_cross(x, y):
    # x: (B, 3, 4), y: (B, 3, 4)
    m = x.sum(0)  # (3, 4) at every batch (pnnx turns x[0] at batch 1 into a one-output unbind)
    return (torch.diag(m), torch.diag(m, 1), torch.diag(m, -2), torch.diag(m[0]), torch.diag(m[1], -1),
            torch.diag(m[2], 2), torch.cross(x, y, dim=1), torch.cross(x.transpose(1, 2), y.transpose(1, 2), dim=-1),
            torch.cross(x.transpose(1, 2), y.transpose(1, 2)))  # no dim: the first dim of size 3


class Scatters(nn.Module):
    """scatter_add with repeated and partial indices (index smaller than src), slice_scatter with steps."""

    def __init__(self):
        super().__init__()
        self.register_buffer("index", torch.tensor([[[0, 1, 0, 3], [2, 2, 2, 2]]]))  # (1, 2, 4) into dim -1 of 4

    def forward(self, x, y):
        # x: (B, 3, 4), y: (B, 3, 6)
        index = self.index  # batch 1: at other batches only the first sample is scattered into, as in PyTorch
        return (torch.scatter_add(x, -1, index, y), torch.scatter_add(x, 1, index[:, :, :3] % 3, y),
                torch.slice_scatter(y, x, dim=2, start=1, end=5), torch.slice_scatter(y, x[:, :, :3], dim=-1, start=0, step=2),
                torch.slice_scatter(x, y[:, :1, :4], dim=1, start=-1))


def special(x):
    # x: (B, 3, 8); scaled to reach the negative half-axis and large values
    z = x * 4.0
    return torch.lgamma(z), torch.lgamma(torch.floor(z) * 0.5 + 0.25), torch.positive(x)


# ---------------------------------------------------------------- in-place edits


class InPlaceEdits(nn.Module):
    """Assignments into clones: pnnx writes Tensor.clone + Tensor.slice_copy / Tensor.index_put / Tensor.fill."""

    def forward(self, x):
        # x: (B, 3, 4).  (x[:, index_tensor] = v is left out: pnnx's own Python for it fails.)
        a = x.clone()
        a[:, 1] = 0.5
        b = torch.clone(x)
        b.fill_(2.0)
        c = x.masked_fill(x > 0, 3.0)
        d = x.clone()
        d[:, :, 1:3] = x[:, :, :2]
        e = x.clone()
        e[x > 1] = 7.0
        g = x.clone()
        g[:, 1:, ::2] = x[:, :2, 1::2] * 2.0
        h = x.clone()
        h[..., -1] = -x[..., 0]
        return a, b, c, d, e, g, h


class IndexPutAccumulate(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("rows", torch.tensor([0, 2, 0, 1]))

    def forward(self, x, y):
        # x: (B, 3, 4), y: (B, 4, 4); repeated row 0 accumulates twice
        return x.transpose(0, 1).index_put((self.rows,), y.transpose(0, 1), accumulate=True).transpose(0, 1)


# ---------------------------------------------------------------- windows and shapes


class Windows(nn.Module):
    def __init__(self):
        super().__init__()
        self.unfold = nn.Unfold(2, padding=1)
        self.fold = nn.Fold((5, 7), (2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1))
        self.lp2 = nn.LPPool2d(2, 2)
        self.lp1 = nn.LPPool1d(1.5, 3, stride=2, ceil_mode=True)
        self.glu = nn.GLU(-1)
        self.rrelu = nn.RReLU(0.2, 0.4)

    def forward(self, x):
        # x: (B, 4, 6, 6); fractional powers of negative sums are NaN, so those lp pools see abs(x).
        # fold input (B, 4*2*3, 9): C=4, 3x3 windows for output 5x7
        cols = x.reshape(x.size(0), 24, 6).repeat(1, 1, 2)[:, :, :9]
        return (self.unfold(x), self.fold(cols), self.lp2(x), self.lp1(x[:, 0].abs()), self.glu(x), self.rrelu(x),
                F.unfold(x, (3, 2), dilation=(2, 1), padding=(0, 1), stride=(1, 2)),
                F.fold(F.unfold(x, 3, padding=1, stride=2), (6, 6), 3, padding=1, stride=2),
                F.lp_pool2d(x.abs(), 3.0, (2, 3), stride=(1, 2), ceil_mode=True), F.lp_pool1d(x[:, 1], 1.0, 4),
                F.glu(x, dim=1), F.rrelu(x, 0.1, 0.3), F.pairwise_distance(x, x.flip(-1), p=2.0),
                F.pairwise_distance(x, x * 0.5, p=1.0, eps=1e-3, keepdim=True), F.pairwise_distance(x, x.flip(2), p=3.0))


class Pools(nn.Module):
    """return_indices on max pools (values and int64 indices as outputs), and repeat_interleave with tensor repeats."""

    def __init__(self):
        super().__init__()
        self.mp = nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)
        self.mp1 = nn.MaxPool1d(2, return_indices=True)
        self.amp = nn.AdaptiveMaxPool1d(3, return_indices=True)
        self.amp2 = nn.AdaptiveMaxPool2d((2, 4), return_indices=True)
        self.register_buffer("repeats", torch.tensor([1, 0, 3, 2]))

    def forward(self, x):
        # x: (B, 4, 6, 7)
        return (*self.mp(x), *self.mp1(x[:, 0]), *self.amp(x[:, 1]), *self.amp2(x),
                *F.max_pool2d(x, (2, 3), stride=(2, 1), padding=(1, 1), dilation=(2, 1), return_indices=True),
                *F.max_pool1d(x[:, 2], 3, 2, 1, return_indices=True),
                torch.repeat_interleave(x, self.repeats, dim=1),
                torch.repeat_interleave(x[:, 0, :, :4], self.repeats, dim=-1))


def grid_sampling(x, g):
    # x: (B, 3, 5, 6), g: (B, 4, 5, 2) scaled to reach past the borders
    g = g * 0.8
    theta = g[:, :2, :3, 0] * 0.5
    outs = []
    for mode in ("bilinear", "nearest", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            for corners in (False, True):
                outs.append(F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=corners))
    grid = F.affine_grid(theta, [x.size(0), 3, 4, 7], align_corners=False)
    outs += [grid, F.affine_grid(theta, [x.size(0), 3, 1, 5], align_corners=True), F.grid_sample(x, grid)]
    return tuple(outs)


def grid_sampling_3d(x, g):
    # x: (B, 2, 3, 4, 5), g: (B, 2, 3, 4, 3)
    theta = g[:, 0, :3, :4, 0] * 0.5
    grid = F.affine_grid(theta, [x.size(0), 2, 2, 3, 4], align_corners=True)
    return (F.grid_sample(x, g, mode="bilinear", padding_mode="zeros"),
            F.grid_sample(x, g, mode="nearest", padding_mode="reflection", align_corners=True),
            F.grid_sample(x, g * 1.3, mode="bilinear", padding_mode="border"), grid, F.grid_sample(x, grid))


# ---------------------------------------------------------------- complex numbers and spectra
# (conjugate views such as ifft of a real tensor cannot go through view_as_real in a traced
# model, and pnnx cannot export resolve_conj, so those leave through torch.real / torch.imag)


def spectra(x):
    # x: (B, 3, 8); odd lengths through n=5/7 and s=(3, ...), every norm
    c = torch.fft.rfft(x)
    ih = torch.fft.ihfft(x, n=7, norm="ortho")
    real, imag = torch.real, torch.imag
    return (
        torch.view_as_real(c), torch.fft.irfft(c, n=7), torch.fft.hfft(c, norm="forward"), real(ih), imag(ih),
        torch.view_as_real(torch.fft.fft(x, n=5, dim=1, norm="ortho")), torch.view_as_real(torch.fft.fft2(x)),
        torch.fft.irfft2(torch.fft.rfft2(x), s=(3, 7)),
        torch.view_as_real(torch.fft.fftn(x, s=(2, 5), dim=(1, 2), norm="forward")),
        torch.fft.irfftn(torch.fft.rfftn(x, norm="ortho"), norm="ortho"), imag(torch.fft.ifft(x, n=3, dim=-2)),
        imag(torch.fft.ifft2(x, norm="ortho")), real(torch.fft.ifftn(x, dim=(1,))),
        torch.fft.hfft2(torch.fft.rfft2(x)), imag(torch.fft.ihfft2(x)), torch.fft.hfftn(c, s=(4,)),
        imag(torch.fft.ihfftn(x, dim=[-1])), torch.fft.hfftn(torch.fft.rfftn(x, dim=(1, 2)), dim=(1, 2)),
        real(torch.fft.ihfftn(x, s=(2, 5), norm="forward")),
    )


def complex_parts(x):
    # x: (B, 3, 4, 2)
    c = torch.view_as_complex(x)
    d = torch.complex(x[..., 1], x[..., 0])
    return (torch.view_as_real(torch.fft.fft(c, dim=1)), torch.real(c), torch.imag(d), torch.real(x),
            torch.view_as_real(torch.fft.ifft(d, n=6, norm="forward")), torch.fft.irfft(d, dim=-2))


def complex_arithmetic(x, y):
    # x, y: (B, 3, 4, 2) -> complex (B, 3, 4); pnnx folds the arithmetic into pnnx.Expression ops
    # with complex literals (as upstream test_ir_complex does), including a negative imaginary part.
    z, w = torch.view_as_complex(x), torch.view_as_complex(y)
    a = z + 3
    b = z - 4j
    c = z * (1.2 - 0.9j - w)
    d = (z * w + 2.5) / (w - 0.5j)
    return torch.view_as_real(a), torch.view_as_real(b), torch.view_as_real(c), torch.view_as_real(d)


class ShortTime(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(12))

    def forward(self, x):
        # x: (B, 64)
        s = torch.stft(x, 16, hop_length=4, win_length=12, window=self.window, return_complex=True)
        s2 = torch.stft(x, 10, hop_length=3, center=False, normalized=True, onesided=False, return_complex=True)
        s3 = torch.stft(x, 8, window=torch.ones(8), pad_mode="constant", return_complex=True)
        y = torch.istft(s, 16, hop_length=4, win_length=12, window=self.window, length=64)
        y2 = torch.istft(s3, 8, window=torch.ones(8), length=60)
        y3 = torch.istft(s, 16, hop_length=4, win_length=12, window=self.window)
        y4 = torch.istft(s2, 10, hop_length=3, center=False, normalized=True, onesided=False, return_complex=True)
        return (torch.view_as_real(s), torch.view_as_real(s2), torch.view_as_real(s3), y, y2, y3,
                torch.view_as_real(y4))


MODELS = {
    "bitwise_logical_int": _spec(lambda: Fn(bitwise), (1, 4, 5), (1, 4, 5),
                                 input_dtypes=(("int64", -40, 70), ("int64", -3, 70)),
                                 description="torch.bitwise_* and logical_* on int64 and bool, number operands, "
                                             "negative and >= 64 shift amounts, shift overflow"),
    "logical_float": _spec(lambda: Fn(logical_float), (1, 3, 6),
                           description="torch.logical_not/and/xor of float tensors (zero is False)"),
    "scan_topk_masked_select": _spec(lambda: Fn(scans), (1, 5, 4),
                                     description="torch.cumsum/cumprod (negative dims, of bool), torch.topk "
                                                 "(largest and smallest), torch.masked_select (broadcast mask, "
                                                 "and an empty selection)"),
    "diag_cross": _spec(lambda: Fn(diag_cross), (1, 3, 4), (1, 3, 4),
                        description="torch.diag of a matrix and of vectors with positive and negative "
                                    "offsets, torch.cross over dim 1 and -1"),
    "scatter_add_slice_scatter": _spec(Scatters, (1, 3, 4), (1, 3, 6),
                                       description="torch.scatter_add (repeated indices, index smaller than "
                                                   "src, negative dim), torch.slice_scatter (step, negative start)"),
    "lgamma_positive": _spec(lambda: Fn(special), (1, 3, 8),
                             description="torch.lgamma over negative and positive values, torch.positive"),
    "inplace_edits": _spec(InPlaceEdits, (1, 3, 4),
                           description="clone + slice/select assignment (Tensor.slice_copy), fill_, masked_fill, "
                                       "index_put with a bool mask, select -1"),
    "index_put_accumulate": _spec(IndexPutAccumulate, (1, 3, 4), (1, 4, 4),
                                  description="Tensor.index_put accumulate=True with a repeated index"),
    "windows_fold_lppool": _spec(Windows, (1, 4, 6, 6), dynamic_batch=2,
                                 description="nn/F unfold and fold (dilation, padding, stride), lp_pool1d/2d "
                                             "(ceil_mode, p=1, 1.5, 2, 3), glu, rrelu (eval), pairwise_distance"),
    "maxpool_indices_repeat": _spec(Pools, (1, 4, 6, 7),
                                    description="return_indices on nn.MaxPool1d/2d, F.max_pool1d/2d (dilation, "
                                                "ceil_mode) and adaptive max pools; repeat_interleave with a "
                                                "tensor of repeats"),
    "grid_sample_2d": _spec(lambda: Fn(grid_sampling), (1, 3, 5, 6), (1, 4, 5, 2), dynamic_batch=2,
                            description="F.grid_sample every mode x padding mode x align_corners, F.affine_grid"),
    "grid_sample_3d": _spec(lambda: Fn(grid_sampling_3d), (1, 2, 3, 4, 5), (1, 2, 3, 4, 3), dynamic_batch=2,
                            description="F.grid_sample on 5-D inputs (bilinear, nearest), 3-D F.affine_grid"),
    "fft_family": _spec(lambda: Fn(spectra), (1, 3, 8),
                        description="torch.fft fft/ifft/rfft/irfft/hfft/ihfft in 1-D, 2-D and n-D forms with n/s "
                                    "(odd, padding, truncating), dims and every norm"),
    "complex_parts": _spec(lambda: Fn(complex_parts), (1, 3, 4, 2),
                           description="torch.view_as_complex/view_as_real, torch.complex, real, imag, "
                                       "transforms of complex tensors"),
    "expr_complex": _spec(lambda: Fn(complex_arithmetic), (1, 3, 4, 2), (1, 3, 4, 2),
                          description="complex-valued pnnx.Expression arithmetic: tensor with real, imaginary "
                                      "and complex literals (1.2-0.9j), products and quotients of complex tensors"),
    "stft_istft": _spec(ShortTime, (1, 64),
                        description="torch.stft (window shorter than n_fft, center reflect/constant, "
                                    "normalized two-sided) and torch.istft (with and without length, "
                                    "complex two-sided)"),
}
