"""Shape, slicing, joining/splitting, padding, resizing and plumbing ops.

Each model exercises one family with its edge cases (negative dims, zero-size
split pieces, steps and negative starts, odd resize sizes, align_corners both
ways).  Models whose graph holds a reshape/expand of the batch are exported with
``dynamic_batch`` so PNNX keeps the batch free (a ``-1``, or a ``pnnx.Expression``
list such as ``[size(@0,0),-1,-1]`` bound to ``$shape``/``$sizes``).  The comment
beside each entry lists the op types PNNX 20261020 actually writes for it.
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import Fn, ModelSpec, spec

def reshape_permute(x):
    y = x.reshape(x.size(0), 3, 20).permute(0, 2, 1)
    return y.reshape(x.size(0), -1, 4) * 2.0


def transpose_t(x):
    a = torch.transpose(x, 1, -1)
    b = x.transpose(-2, -1)
    c = torch.t(torch.flatten(x, 1))
    return a, b, c


def squeeze_unsqueeze(x):
    # x: (B, 3, 1, 5); squeeze() drops the batch too when B == 1, as in PyTorch
    return torch.squeeze(x), torch.squeeze(x, (1, 2)), torch.unsqueeze(x, -1), torch.unsqueeze(x, 0)


def expand_repeat(x, y):
    # x: (B, 1, 4, 1), y: (B, 3, 4, 5)
    return x.expand(-1, 3, 4, -1), x.expand_as(y), x.repeat(1, 2, 1, 3), x.repeat(2, 1, 2, 1, 3)


def flip_roll(x):
    return torch.flip(x, [1, -1]), torch.roll(x, (1, -2), (1, 3)), torch.roll(x, 3)


def tile_interleave(x, y):
    # x: (B, 3, 4, 5), y: (B, 12, 5)
    return torch.tile(x, (2, 1)), torch.repeat_interleave(x, 2, dim=1), x.unflatten(-1, (1, 5)), x.reshape_as(y)


# ------------------------------------------------------------------ joining and splitting


def cat_stack(x, y):
    # x: (B, 3, 4, 5), y: (B, 3, 4, 2)
    return torch.cat((x, y, x), dim=-1), torch.stack([x, x * 2.0], dim=-2), torch.stack([y, y + 1.0, y], 1)


def split_sizes(x):
    # x: (B, 3, 4, 5); the empty piece is computed but not returned (fixturelib's
    # error check cannot take an empty output)
    first, _, last = torch.split(x, [1, 0, 4], dim=3)
    return (*torch.split(x, 2, dim=-1), first, last * 2.0)


def chunk_unbind(x):
    # x: (B, 3, 4, 5)
    return (*torch.chunk(x, 2, dim=1), *torch.tensor_split(x, 3, dim=3),
            *torch.tensor_split(x, [1, 4], dim=-1), *torch.unbind(x, dim=-3))


# ------------------------------------------------------------------ slicing and indexing


def slice_steps(x):
    # x: (B, 3, 6, 7)
    return x[:, 1:, ::2, -3:], x[:, :, 1:-1], x[..., 2:6:3], x[:, :, -5:-1:2]


def select_narrow(x):
    # x: (B, 3, 6, 7)
    return x[:, 1], x[:, -1, 2:], x.select(2, -2), torch.narrow(x, 3, 1, 4), torch.narrow(x, -1, -3, 2)


def index_last_dim(x):
    # pnnx's generated Python writes Tensor.index as x[..., idx], which is only right for
    # the last dim, so the fixture self-check only passes there.
    mask = torch.tensor([True, False, True, True, False, True, False])
    return x[..., [2, 0, -1, 2]], x[..., mask]


def gather_index_select(x, index):
    # x: (B, 3, 4, 5) float, index: (B, 2, 4, 5) int64 in [0, 3)
    picked = torch.index_select(x, -1, torch.tensor([4, 0, 3, 3]))
    return torch.gather(x, 1, index), torch.gather(x, -1, index[:, :, :3, :2]), picked


# ------------------------------------------------------------------ dynamic shapes


def reshape_dynamic(x):
    # Two dims depend on the batch, so pnnx cannot write a literal shape with one -1.
    z = torch.flatten(x, 1)
    w = z.unsqueeze(0) + z.unsqueeze(1)  # (B, B, 60)
    return w.view(w.size(0), w.size(1) * 3, -1)


def expand_repeat_dynamic(x):
    first = x[:1]
    return first.expand(x.size(0), -1, -1), first.repeat(x.size(0), 1, 2)


def slice_dynamic(x):
    # x: (B, 4, 5, 6); ends computed from the batch size
    return x[:, :, : x.size(0) + 1] * 2.0, x[:, 1 : x.size(0) + 1, : x.size(0) + 2]


def interpolate_dynamic_size(x):
    return F.interpolate(x, size=(x.size(0) + 3, 5), mode="bilinear")


# ------------------------------------------------------------------ padding


def pad_constant(x):
    # x: (B, 3, 4, 5)
    return (F.pad(x, (1, 2, 0, 3), value=0.5), F.pad(x, (-1, 2, 1, -1)), F.pad(x, (1, 1, 0, 0, 1, 2)),
            nn.functional.pad(x, (2, 0), value=-1.5))


def pad_modes(x):
    # x: (B, 3, 4, 5); negative pads crop first in every mode
    return (F.pad(x, (1, 2, 3, 0), mode="reflect"), F.pad(x, (1, 4, 2, 0), mode="replicate"),
            F.pad(x, (1, 2, 4, 0), mode="circular"), F.pad(x, (-1, 2, 1, -2), mode="reflect"),
            F.pad(x, (-2, 3, 0, -1), mode="circular"))


class PadModules(nn.Module):
    """The nn.*Pad* modules; pnnx 20261020 writes all of them as F.pad."""

    def __init__(self):
        super().__init__()
        self.zero2d = nn.ZeroPad2d((1, 2, 0, 1))
        self.const1d = nn.ConstantPad1d((2, 1), 1.5)
        self.const2d = nn.ConstantPad2d(1, -2.0)
        self.reflect1d = nn.ReflectionPad1d((2, 3))
        self.reflect2d = nn.ReflectionPad2d((1, 0, 2, 3))
        self.replicate1d = nn.ReplicationPad1d((3, 1))
        self.replicate2d = nn.ReplicationPad2d((1, 4, 2, 0))

    def forward(self, x):
        # x: (B, 3, 4, 6); the 1-d pads see (B, 12, 6)
        flat = x.flatten(1, 2)
        return (self.zero2d(x), self.const1d(flat), self.const2d(x), self.reflect1d(flat),
                self.reflect2d(x), self.replicate1d(flat), self.replicate2d(x))


# ------------------------------------------------------------------ resizing


class UpsampleNearest(nn.Module):
    def __init__(self):
        super().__init__()
        self.up2 = nn.Upsample(scale_factor=2)
        self.up_size = nn.Upsample(size=(8, 11))
        self.up_odd = nn.Upsample(scale_factor=1.7)
        self.up_nearest2d = nn.UpsamplingNearest2d(size=(7, 3))

    def forward(self, x):
        # x: (B, 3, 5, 7); 1.7 -> (8, 11) but indices use 1/1.7, not 5/8 and 7/11
        return (self.up2(x), self.up_size(x), self.up_odd(x), self.up_nearest2d(x),
                F.upsample_nearest(x, size=(3, 9)), F.interpolate(x, scale_factor=(0.6, 2.3)))


class UpsampleBilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.by_scale = nn.Upsample(scale_factor=(1.5, 0.6), mode="bilinear")
        self.by_scale_corners = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.by_size = nn.Upsample(size=(9, 4), mode="bilinear")
        self.bilinear2d = nn.UpsamplingBilinear2d(size=(4, 9))
        self.bilinear2d_scale = nn.UpsamplingBilinear2d(scale_factor=1.5)

    def forward(self, x):
        # x: (B, 3, 5, 7)
        return (self.by_scale(x), self.by_scale_corners(x), self.by_size(x), self.bilinear2d(x),
                self.bilinear2d_scale(x), F.upsample_bilinear(x, scale_factor=2),
                F.interpolate(x, size=(4, 10), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=2.3, mode="bilinear"),
                F.upsample(x, scale_factor=1.3, mode="bilinear"))


def interpolate_misc(x):
    # x: (B, 3, 5, 7)
    return (F.interpolate(x, scale_factor=1.3, mode="bilinear", recompute_scale_factor=True),
            F.interpolate(x, scale_factor=1.7, mode="nearest", recompute_scale_factor=True),
            F.interpolate(x, scale_factor=2, mode="nearest-exact"),
            F.interpolate(x, size=(6, 4), mode="nearest-exact"))


def interpolate_1d_3d(x, v):
    # x: (B, 3, 5), v: (B, 2, 3, 4, 5)
    return (F.interpolate(x, scale_factor=2, mode="linear"), F.interpolate(x, size=8),
            F.interpolate(x, size=7, mode="linear", align_corners=True), F.interpolate(x, scale_factor=1.5),
            F.interpolate(v, scale_factor=(1.5, 2, 0.7), mode="trilinear"),
            F.interpolate(v, size=(4, 6, 3)), F.interpolate(v, size=(2, 5, 7), mode="trilinear", align_corners=True))


def interpolate_bicubic(x):
    # x: (B, 3, 5, 7)
    return (F.interpolate(x, scale_factor=2, mode="bicubic"),
            F.interpolate(x, size=(7, 3), mode="bicubic", align_corners=True),
            F.interpolate(x, scale_factor=(1.3, 0.6), mode="bicubic"))


def shuffles(x):
    # x: (B, 8, 4, 6)
    return F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2), nn.PixelShuffle(2)(x[:, :4]) * 2.0


# ------------------------------------------------------------------ plumbing


def nested_outputs(x):
    return x + 1.0, (x * 2.0, (x - 1.0, x * x))


def casts(x, y):
    as_long = (x * 3.0).to(torch.long)
    return (as_long.to(torch.float) * 0.5, x.double() + 1.0, (x * 4.0).long().type_as(y) * y,
            (x * 2.0).int().float(), (x > 0.3).float() * 1.0)


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(10, 4)

    def forward(self, index, table):
        # index: (B, 6) int64 in [0, 10); table: (B, 10, 4) -> F.embedding's weight is an input
        weight = table[:1].reshape(10, 4)
        return self.embedding(index), F.embedding(index, weight)


def _spec(fn_or_module, *shapes, description, **kw) -> ModelSpec:
    build = fn_or_module if isinstance(fn_or_module, type) else (lambda: Fn(fn_or_module))
    return spec(build, *shapes, description=description, **kw)


MODELS = {
    # --- shape
    "shape_reshape_permute": _spec(reshape_permute, (1, 3, 4, 5), dynamic_batch=2,
                                   description="Tensor.reshape (-1 batch) and Tensor.permute"),
    "shape_transpose_t": _spec(transpose_t, (1, 3, 4, 5),
                               description="torch.transpose with negative dims, torch.t on a flattened input"),
    "shape_squeeze_unsqueeze": _spec(squeeze_unsqueeze, (1, 3, 1, 5),
                                     description="torch.squeeze (all / dim list), torch.unsqueeze (-1, 0)"),
    "shape_expand_repeat": _spec(expand_repeat, (1, 1, 4, 1), (1, 3, 4, 5),
                                 description="Tensor.expand with -1, Tensor.expand_as, Tensor.repeat incl. a new dim"),
    "shape_flip_roll": _spec(flip_roll, (1, 3, 4, 5),
                             description="torch.flip dims (1,-1), torch.roll by dims and flattened"),
    "shape_tile_interleave": _spec(tile_interleave, (1, 3, 4, 5), (1, 12, 5),
                                   description="torch.tile (short dims), torch.repeat_interleave, Tensor.unflatten, "
                                               "Tensor.reshape_as"),
    # --- joining and splitting
    "concat_cat_stack": _spec(cat_stack, (1, 3, 4, 5), (1, 3, 4, 2),
                              description="torch.cat of 3 on dim -1, torch.stack on dims -2 and 1"),
    "concat_split_sizes": _spec(split_sizes, (1, 3, 4, 5),
                                description="torch.split by 2 on dim -1 (last piece short) and by [1,0,4] "
                                            "(an empty piece)"),
    "concat_chunk_unbind": _spec(chunk_unbind, (1, 3, 4, 5),
                                 description="torch.chunk, torch.tensor_split (sections and indices), torch.unbind"),
    # --- slicing and indexing
    "slice_steps": _spec(slice_steps, (1, 3, 6, 7),
                         description="Tensor.slice: multi-dim lists, steps, negative starts and ends"),
    "slice_select_narrow": _spec(select_narrow, (1, 3, 6, 7),
                                 description="Tensor.select, Tensor.slice with a select entry, torch.narrow "
                                             "(also negative start)"),
    "slice_index_last_dim": _spec(index_last_dim, (1, 3, 4, 7),
                                  description="Tensor.index with an int list (negative entry) and a bool mask"),
    "slice_gather_index_select": _spec(gather_index_select, (1, 3, 4, 5), (1, 2, 4, 5),
                                       input_dtypes=("float32", ("int64", 3)),
                                       description="torch.gather (index smaller than input), torch.index_select "
                                                   "with a constant index on dim -1"),
    # --- dynamic shapes
    "dynamic_reshape_expr": _spec(reshape_dynamic, (1, 3, 4, 5), dynamic_batch=2,
                                  description="Tensor.reshape whose $shape is a pnnx.Expression list "
                                              "[size(@0,0),mul(size(@0,1),3),20]"),
    "dynamic_expand_repeat": _spec(expand_repeat_dynamic, (1, 3, 4), dynamic_batch=2,
                                   description="Tensor.expand / Tensor.repeat with $sizes from pnnx.Expression"),
    "dynamic_slice_ends": _spec(slice_dynamic, (1, 4, 5, 6), dynamic_batch=2,
                                description="Tensor.slice with $end from an expression and $ends from "
                                            "pnnx.SliceIndexes"),
    "dynamic_interpolate_size": _spec(interpolate_dynamic_size, (1, 3, 4, 5), dynamic_batch=2,
                                      description="F.upsample bilinear with $size from an expression"),
    # --- padding
    "pad_constant": _spec(pad_constant, (1, 3, 4, 5),
                          description="F.pad constant: value, negative (cropping) pads, three dims"),
    "pad_modes": _spec(pad_modes, (1, 3, 4, 5),
                       description="F.pad reflect / replicate / circular, also with negative pads"),
    "pad_modules": _spec(PadModules, (1, 3, 4, 6),
                         description="nn.ZeroPad2d, ConstantPad1d/2d, ReflectionPad1d/2d, ReplicationPad1d/2d"),
    # --- resizing
    "resize_nearest": _spec(UpsampleNearest, (1, 3, 5, 7),
                            description="nearest by scale (2, 1.7, (0.6,2.3)) and by size, nn and F forms"),
    "resize_bilinear": _spec(UpsampleBilinear, (1, 3, 5, 7),
                             description="bilinear by scale and size, align_corners True and False"),
    "resize_interpolate_misc": _spec(interpolate_misc, (1, 3, 5, 7),
                                     description="F.interpolate recompute_scale_factor=True, nearest-exact"),
    "resize_1d_3d": _spec(interpolate_1d_3d, (1, 3, 5), (1, 2, 3, 4, 5),
                          description="linear and nearest on 3-D inputs, trilinear and nearest on 5-D inputs"),
    "resize_bicubic": _spec(interpolate_bicubic, (1, 3, 5, 7),
                            description="bicubic by scale and size, align_corners True and False"),
    "resize_shuffles": _spec(shuffles, (1, 8, 4, 6),
                             description="F.pixel_shuffle, F.pixel_unshuffle (nn forms export the same)"),
    # --- plumbing
    "plumbing_nested_tuple": _spec(nested_outputs, (1, 3, 4, 5),
                                   description="nested tuple outputs: prim::TupleConstruct of TupleConstructs"),
    "plumbing_casts": _spec(casts, (1, 3, 4, 5), (1, 3, 4, 5),
                            description="Tensor.to (long, float, double, int), Tensor.type_as"),
    "plumbing_embedding": _spec(Embeddings, (1, 6), (1, 10, 4), input_dtypes=(("int64", 10), "float32"), dynamic_batch=2,
                                description="nn.Embedding and F.embedding (weight computed from an input)"),
}
