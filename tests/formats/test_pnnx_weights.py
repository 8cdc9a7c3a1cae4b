"""Weights: stored zip entries copied into read-only arrays, every dtype, zip32 and real ZIP64 files."""

import numpy as np
import pytest

from kuiper.formats.pnnx import load_pnnx
from kuiper.formats.pnnx_bin import WeightArchive

from conftest import MODELS, write_model


def test_real_pnnx_export_is_zip64_and_reads_read_only_weights():
    ir = load_pnnx(MODELS / "flatten_linear" / "model.pnnx.param")
    raw = (MODELS / "flatten_linear" / "model.pnnx.bin").read_bytes()
    assert b"PK\x06\x06" in raw  # the ZIP64 end-of-central-directory record pnnx writes
    weight = next(op for op in ir.ops if op.type == "Linear").attrs["weight"]
    assert weight.dtype == np.float32
    assert not weight.flags.writeable  # a private copy, shared by every model op that reads it


@pytest.mark.parametrize(
    "token, dtype",
    [("f32", "<f4"), ("f64", "<f8"), ("f16", "<f2"), ("i64", "<i8"), ("i32", "<i4"), ("i16", "<i2"),
     ("i8", "i1"), ("u8", "u1"), ("bool", "?"), ("c64", "<c8"), ("c128", "<c16")],
)
def test_each_dtype_round_trips(tmp_path, token, dtype):
    values = (np.arange(6) % 2 == 1) if dtype == "?" else (np.arange(6) - 2).astype(dtype)
    values = values.reshape(2, 3).astype(dtype)
    write_model(tmp_path, "", {"a.data": values.tobytes()})
    read = WeightArchive(tmp_path / "m.pnnx.bin").read("a.data", (2, 3), token)
    np.testing.assert_array_equal(read, values)
    assert read.dtype == np.dtype(dtype)


def test_bf16_is_widened_to_float32(tmp_path):
    values = np.array([1.0, -2.5, 3.140625], dtype=np.float32)  # exactly representable in bf16
    top_halves = (values.view(np.uint32) >> 16).astype("<u2")
    write_model(tmp_path, "", {"a.data": top_halves.tobytes()})
    read = WeightArchive(tmp_path / "m.pnnx.bin").read("a.data", (3,), "bf16")
    assert read.dtype == np.float32
    np.testing.assert_array_equal(read, values)


def test_zero_d_attribute_stored_with_shape_one(tmp_path):
    text = "7767517\n2 1\npnnx.Attribute a 0 1 x @data=(1)f32 #x=(1)f32\npnnx.Output out 1 0 x\n"
    param = write_model(tmp_path, text, {"a.data": np.array([7.5], "<f4").tobytes()})
    ir = load_pnnx(param)
    assert ir.ops[0].attrs["data"].tolist() == [7.5]
