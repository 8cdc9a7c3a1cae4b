"""Whole model families (tools/fixture_models/families_classifiers.py and families_dense.py) end to end.

tests/end_to_end/test_models.py already compares every fixture with PyTorch; this file adds what is
specific to a family:
* the exported graph really contains the op types (and param values) the family is meant
  to cover, so a regenerated fixture cannot silently lose coverage;
* batch 3 matches PyTorch, and each sample of a batch-3 run equals running that sample
  alone (a baked-in batch, or an op that mixes samples, breaks this);
* family-specific properties of the outputs (YOLO boxes lie where their grid cell and
  anchor allow; dense outputs keep the input's spatial size).

Tolerance: as tests/end_to_end/test_models.py, 1e-4 max abs error, or 1e-5 relative to the largest
magnitude for outputs above 10 (the YOLO box coordinates, in pixels).
"""

from collections import Counter

import numpy as np
import pytest

import kuiper
from kuiper.formats.pnnx import load_pnnx

from conftest import MODELS, assert_close_to_pytorch, pnnx_file_ops, reference_batches

FAMILIES = ["resnet_basic", "mobilenet_v2", "mobilenet_v3_small", "yolov5_style", "unet", "vit_block"]

# Op types each family must contain, with the minimum count pnnx emitted.
EXPECTED_OP_TYPES = {
    "resnet_basic": {"nn.Conv2d": 15, "nn.ReLU": 13, "pnnx.Expression": 6, "nn.AdaptiveAvgPool2d": 1,
                     "torch.flatten": 1, "nn.Linear": 1},
    "mobilenet_v2": {"nn.Conv2d": 52, "nn.ReLU6": 35, "pnnx.Expression": 11, "nn.AdaptiveAvgPool2d": 1,
                     "torch.flatten": 1, "nn.Linear": 1},
    "mobilenet_v3_small": {"nn.Conv2d": 52, "nn.Hardswish": 19, "nn.Hardsigmoid": 9, "nn.ReLU": 14,
                           "nn.AdaptiveAvgPool2d": 10, "pnnx.Expression": 16, "nn.Linear": 2},
    "yolov5_style": {"nn.Conv2d": 60, "nn.SiLU": 57, "nn.MaxPool2d": 3, "nn.Upsample": 2, "torch.cat": 17,
                     "pnnx.Expression": 13, "pnnx.Attribute": 6, "Tensor.reshape": 6, "Tensor.permute": 3,
                     "F.sigmoid": 3, "torch.split": 3},
    "unet": {"nn.Conv2d": 16, "nn.ConvTranspose2d": 2, "nn.GroupNorm": 14, "nn.MaxPool2d": 3, "nn.ReLU": 14,
             "nn.ReflectionPad2d": 1, "nn.Upsample": 1, "F.upsample": 1, "torch.cat": 3},
    "vit_block": {"nn.Conv2d": 1, "torch.flatten": 1, "torch.transpose": 5, "Tensor.expand": 1, "torch.cat": 1,
                  "nn.LayerNorm": 5, "nn.Linear": 9, "Tensor.reshape": 4, "Tensor.permute": 2,
                  "torch.unbind": 2, "torch.matmul": 4, "F.softmax": 2, "nn.GELU": 2, "Tensor.select": 1,
                  "pnnx.Expression": 8, "pnnx.Attribute": 2},
}


def ops_of(name):
    return pnnx_file_ops(MODELS / name / "model.pnnx.param")


def ops_by_type(name, op_type):
    return [op for op in ops_of(name) if op.type == op_type]


# ------------------------------------------------------------ what the graphs contain (no running)


@pytest.mark.parametrize("name", FAMILIES)
def test_family_graph_contains_the_op_types_it_is_meant_to_cover(name):
    counts = Counter(op.type for op in ops_of(name))
    missing = {t: n for t, n in EXPECTED_OP_TYPES[name].items() if counts[t] < n}
    assert not missing, f"{name}: expected at least {missing}, pnnx emitted {dict(counts)}"


def test_mobilenets_have_depthwise_convs_of_both_kernel_sizes():
    def depthwise_kernels(name):
        return {tuple(op.params["kernel_size"]) for op in ops_by_type(name, "nn.Conv2d")
                if op.params["groups"] > 1 and op.params["groups"] == op.params["in_channels"] == op.params["out_channels"]}

    assert depthwise_kernels("mobilenet_v2") == {(3, 3)}
    assert depthwise_kernels("mobilenet_v3_small") == {(3, 3), (5, 5)}
    strides = {tuple(op.params["stride"]) for op in ops_by_type("mobilenet_v2", "nn.Conv2d")}
    assert {(1, 1), (2, 2)} <= strides


def test_resnet_has_strided_1x1_downsample_convs():
    downsample = [op for op in ops_by_type("resnet_basic", "nn.Conv2d")
                  if tuple(op.params["kernel_size"]) == (1, 1) and tuple(op.params["stride"]) == (2, 2)]
    assert len(downsample) == 2  # entering stages 2 and 3


def test_unet_uses_both_align_corners_and_reflect_padding():
    resizes = ops_by_type("unet", "nn.Upsample") + ops_by_type("unet", "F.upsample")
    assert {(op.params["mode"], op.params["align_corners"]) for op in resizes} == {("bilinear", True), ("bilinear", False)}
    (pad,) = ops_by_type("unet", "nn.ReflectionPad2d")
    assert tuple(pad.params["padding"]) == (0, 1, 0, 1)  # asymmetric: cannot fold into the conv
    modes = Counter(op.params["padding_mode"] for op in ops_by_type("unet", "nn.Conv2d"))
    assert modes["reflect"] == 14  # pnnx folds symmetric reflect pads into the convs
    transposed = {(tuple(op.params["kernel_size"]), tuple(op.params["output_padding"]))
                  for op in ops_by_type("unet", "nn.ConvTranspose2d")}
    assert transposed == {((2, 2), (0, 0)), ((3, 3), (1, 1))}
    assert {op.params["num_groups"] for op in ops_by_type("unet", "nn.GroupNorm")} == {2}


def test_yolo_detect_head_is_plain_ops_with_constant_grids():
    permutes = ops_by_type("yolov5_style", "Tensor.permute")
    assert {tuple(op.params["dims"]) for op in permutes} == {(0, 1, 3, 4, 2)}
    splits = ops_by_type("yolov5_style", "torch.split")
    assert {tuple(op.params["split_size_or_sections"]) for op in splits} == {(2, 2, 5)}
    grids = [op for op in load_pnnx(MODELS / "yolov5_style" / "model.pnnx.param").ops if op.type == "Constant"]
    assert sorted(op.attrs["data"].shape for op in grids) == sorted([(1, 3, 4, 8, 2)] * 2 + [(1, 3, 2, 4, 2)] * 2
                                                                    + [(1, 3, 1, 2, 2)] * 2)
    # exported with a second batch size, so the reshapes keep the batch free
    assert all(op.params["shape"][0] == -1 for op in ops_by_type("yolov5_style", "Tensor.reshape"))
    exprs = [op.params["expr"] for op in ops_by_type("yolov5_style", "pnnx.Expression")]
    assert sum("pow(" in e for e in exprs) == 3  # wh = (2 * p) ** 2 * anchor_grid, once per level


def test_vit_attention_is_hand_written_with_batch_free_reshapes():
    assert not ops_by_type("vit_block", "nn.MultiheadAttention")
    assert {op.params["dim"] for op in ops_by_type("vit_block", "F.softmax")} == {-1}
    assert all(op.params["shape"][0] == -1 for op in ops_by_type("vit_block", "Tensor.reshape"))
    (expand,) = ops_by_type("vit_block", "Tensor.expand")
    assert expand.input_keys == ["input", "sizes"]  # the size list comes from a pnnx.Expression


# ------------------------------------------------------------ running them


@pytest.mark.parametrize("name", FAMILIES)
def test_family_matches_pytorch_at_batch_3(name, backend_name):
    data = reference_batches(name)["b3"]
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend=backend_name)
    (want,) = data["outputs"]
    assert_close_to_pytorch(model(*data["inputs"]), want, f"{name} b3")


@pytest.mark.parametrize("name", FAMILIES)
def test_each_sample_of_a_batch_is_computed_independently(name, backend_name):
    # Each sample run alone must match PyTorch's row for it in the batch of 3, as the batch itself
    # does (test_family_matches_pytorch_at_batch_3): a sample that leaked into another would not.
    # Alone and together are not compared with each other: a GPU's BLAS picks other kernels for
    # other batch sizes, so the two round differently, each within the tolerance of PyTorch.
    batch = reference_batches(name)["b3"]
    (x,), (want,) = batch["inputs"], batch["outputs"]
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend=backend_name)
    for i in range(x.shape[0]):
        assert_close_to_pytorch(model(x[i:i + 1]), want[i:i + 1], f"{name} sample {i} alone vs PyTorch's row {i} of batch 3")


@pytest.mark.parametrize("name, classes", [("resnet_basic", 10), ("mobilenet_v2", 10),
                                           ("mobilenet_v3_small", 10), ("vit_block", 10)])
def test_classifiers_give_one_row_of_logits_per_sample(name, classes):
    (x,) = reference_batches(name)["b3"]["inputs"]
    out = kuiper.to_numpy(kuiper.load(MODELS / name / "model.pnnx.param")(x))
    assert out.shape == (3, classes) and np.all(np.isfinite(out))


def test_unet_output_keeps_the_input_resolution():
    (x,) = reference_batches("unet")["b3"]["inputs"]
    out = kuiper.to_numpy(kuiper.load(MODELS / "unet" / "model.pnnx.param")(x))
    assert out.shape == (3, 2, *x.shape[2:])


# YOLOv5's default anchors (pixels) and the fixture's levels: stride and (ny, nx) of a 32x64 input.
YOLO_ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))
YOLO_LEVELS = ((8, 4, 8), (16, 2, 4), (32, 1, 2))


def yolo_bounds():
    """Per output row, the range each column can take, from the Detect equations alone:
    x in [(gx - 0.5) s, (gx + 1.5) s], y likewise, w in [0, 4 anchor_w], h in [0, 4 anchor_h],
    objectness and class scores in [0, 1]. Rows run level, anchor, gy, gx."""
    low, high = [], []
    for (stride, ny, nx), anchors in zip(YOLO_LEVELS, YOLO_ANCHORS):
        for a in range(3):
            aw, ah = anchors[2 * a], anchors[2 * a + 1]
            for gy in range(ny):
                for gx in range(nx):
                    low.append([(gx - 0.5) * stride, (gy - 0.5) * stride, 0, 0] + [0] * 5)
                    high.append([(gx + 1.5) * stride, (gy + 1.5) * stride, 4 * aw, 4 * ah] + [1] * 5)
    return np.array(low, dtype=np.float64), np.array(high, dtype=np.float64)


def test_yolo_reference_boxes_lie_where_their_cell_and_anchor_allow():
    # checks the bounds themselves (and the row order they assume) on PyTorch's output
    low, high = yolo_bounds()
    (want,) = reference_batches("yolov5_style")["b3"]["outputs"]
    assert want.shape == (3, *low.shape)
    assert np.all((want >= low - 1e-4) & (want <= high + 1e-4))


def test_yolo_boxes_lie_where_their_cell_and_anchor_allow(backend_name):
    low, high = yolo_bounds()
    (x,) = reference_batches("yolov5_style")["b3"]["inputs"]
    out = kuiper.to_numpy(kuiper.load(MODELS / "yolov5_style" / "model.pnnx.param", backend=backend_name)(x))
    assert out.shape == (3, *low.shape)
    outside = ~((out >= low - 1e-4) & (out <= high + 1e-4))
    assert not outside.any(), f"{outside.sum()} values outside their cell/anchor range, first at {np.argwhere(outside)[0]}"
