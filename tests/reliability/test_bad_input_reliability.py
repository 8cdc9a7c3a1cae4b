"""Regression tests for the adversarial audit of issue 11: each numbered finding, each refused clearly.

Every hostile file here must give a specific KuiperError naming the file/line, op or
input, before anything large is allocated or any long loop runs.
"""

import io
import os
import struct
import warnings
import zipfile
import zlib

import numpy as np
import pytest
from conftest import LINEAR, LINEAR_W, LINEAR_WEIGHTS, MODELS, op_model, write_model

import kuiper
from kuiper.errors import (
    InputError,
    KuiperError,
    ModelFormatError,
    OperatorParamError,
    ShapeError,
    SizeLimitError,
    UnknownParamWarning,
    UnsupportedOperatorError,
)
from kuiper.formats.pnnx import load_pnnx
from kuiper.formats.pnnx_bin import EXTRA_ENTRIES_ALLOWED, WeightArchive
from kuiper.limits import budget_bytes, parse_size

W, WEIGHTS = LINEAR_W, LINEAR_WEIGHTS
X = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
EXPECTED = np.array([[9.0, 27.0]], dtype=np.float32)  # by hand: W = [[0,1,2],[3,4,5]], b = 1


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "64MiB")


def conv_line(name="c", weight_shape=(1, 1, 3, 3), **params):
    values = {"in_channels": 1, "out_channels": 1, "kernel_size": "(3,3)", "stride": "(1,1)", "padding": "(0,0)",
              "dilation": "(1,1)", "groups": 1, "bias": False, "padding_mode": "zeros"}
    values.update(params)
    return f"nn.Conv2d {name} 1 1 x y " + " ".join(f"{k}={v}" for k, v in values.items())


# -- 2 and 11/12: the weight archive -----------------------------------------------------


def test_2_a_bin_truncated_or_rewritten_under_a_loaded_model_changes_nothing(tmp_path):
    param = write_model(tmp_path, LINEAR, WEIGHTS)
    model = kuiper.load(param)
    bin_path = tmp_path / "m.pnnx.bin"
    raw = bin_path.read_bytes()
    bin_path.write_bytes(raw.replace(W.tobytes(), (W + 100).tobytes()))  # rewritten in place: same size
    np.testing.assert_array_equal(model(X), EXPECTED)
    os.truncate(bin_path, 10)  # a memory map would SIGBUS here
    np.testing.assert_array_equal(model(X), EXPECTED)


def _central_record(raw: bytes, name: bytes) -> int:
    """Offset of the central-directory record of entry ``name``."""
    at = raw.find(b"PK\x01\x02")
    while at >= 0:
        name_length = struct.unpack_from("<H", raw, at + 28)[0]
        if raw[at + 46 : at + 46 + name_length] == name:
            return at
        at = raw.find(b"PK\x01\x02", at + 4)
    raise AssertionError(name)


def _bin_with(tmp_path, entries: dict[str, bytes]):
    param = write_model(tmp_path, LINEAR, entries)
    return param, tmp_path / "m.pnnx.bin"


def test_11_duplicate_zip_entry_names_are_refused(tmp_path):
    param = write_model(tmp_path, LINEAR, WEIGHTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile's own "Duplicate name" warning
        with zipfile.ZipFile(tmp_path / "m.pnnx.bin", "a") as archive:
            archive.writestr("fc.weight", (W + 1).tobytes())
    with pytest.raises(ModelFormatError, match="duplicate zip entry 'fc.weight'"):
        kuiper.load(param)


def _entry_offset(raw: bytes, name: bytes) -> int:
    """Where entry ``name``'s local header starts, as its central-directory record says (field at +42)."""
    return struct.unpack_from("<I", raw, _central_record(raw, name) + 42)[0]


def _point_entry_at(raw: bytearray, name: bytes, offset: int) -> None:
    """Rewrite entry ``name``'s central-directory record to claim the local header at ``offset``."""
    struct.pack_into("<I", raw, _central_record(raw, name) + 42, offset)


def _two_entry_bin(tmp_path):
    """The model with one more weight entry, and the bytes of its .pnnx.bin to tamper with."""
    param, bin_path = _bin_with(tmp_path, {**WEIGHTS, "zz.others": (W + 7).tobytes()})
    return param, bin_path, bytearray(bin_path.read_bytes())


def test_11_a_central_directory_pointing_at_another_entry_is_refused(tmp_path):
    param, bin_path, raw = _two_entry_bin(tmp_path)
    # The two directory records swap offsets (names of equal length, so no span overlaps):
    # fc.weight claims zz.others' bytes, and only the local header's name can tell.
    weight_offset, other_offset = _entry_offset(raw, b"fc.weight"), _entry_offset(raw, b"zz.others")
    _point_entry_at(raw, b"fc.weight", other_offset)
    _point_entry_at(raw, b"zz.others", weight_offset)
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="local header names 'zz.others'"):
        kuiper.load(param)


def test_11_two_entries_sharing_bytes_overlap(tmp_path):
    param, bin_path, raw = _two_entry_bin(tmp_path)
    _point_entry_at(raw, b"fc.weight", _entry_offset(raw, b"zz.others"))
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="overlap"):
        kuiper.load(param)


def test_11_a_corrupted_weight_fails_its_crc(tmp_path):
    param, bin_path = _bin_with(tmp_path, WEIGHTS)
    raw = bin_path.read_bytes()
    bin_path.write_bytes(raw.replace(W.tobytes(), (W + 1).tobytes()))
    with pytest.raises(ModelFormatError, match="entry 'fc.weight' fails its CRC-32 check"):
        kuiper.load(param)


def test_11_the_encrypted_flag_is_refused(tmp_path):
    param, bin_path = _bin_with(tmp_path, WEIGHTS)
    raw = bytearray(bin_path.read_bytes())
    record = _central_record(raw, b"fc.bias")
    struct.pack_into("<H", raw, record + 8, struct.unpack_from("<H", raw, record + 8)[0] | 1)
    bin_path.write_bytes(bytes(raw))
    with pytest.raises(ModelFormatError, match="entry 'fc.bias' is encrypted"):
        kuiper.load(param)


def _zip_with_many_entries(path, real: dict[str, bytes], extra_count: int) -> None:
    """A stored zip with ``real`` entries and ``extra_count`` empty ones, written directly (fast)."""
    body, directory = io.BytesIO(), io.BytesIO()
    names = [(name.encode(), data) for name, data in real.items()]
    names += [(f"unused.{i}".encode(), b"") for i in range(extra_count)]
    for name, data in names:
        offset = body.tell()
        crc = zlib.crc32(data)
        body.write(struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data), len(name), 0))
        body.write(name + data)
        directory.write(struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(data),
                                    len(data), len(name), 0, 0, 0, 0, 0, offset))
        directory.write(name)
    count = len(names)
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                      directory.tell(), body.tell(), 0)
    if count >= 0xFFFF:  # ZIP64 end record + locator
        zip64_at = body.tell() + directory.tell()
        end = (struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, directory.tell(), body.tell())
               + struct.pack("<4sIQI", b"PK\x06\x07", 0, zip64_at, 1) + end)
    path.write_bytes(body.getvalue() + directory.getvalue() + end)


def test_12_a_bin_with_a_hundred_thousand_unused_entries_is_refused_from_its_end_record(tmp_path):
    param = write_model(tmp_path, LINEAR)
    _zip_with_many_entries(tmp_path / "m.pnnx.bin", WEIGHTS, 100_000)
    with pytest.raises(ModelFormatError, match="lists 100002 entries, more than the 1026 this model can use"):
        kuiper.load(param)


def test_12_a_few_unused_entries_are_tolerated(tmp_path):
    param = write_model(tmp_path, LINEAR)
    _zip_with_many_entries(tmp_path / "m.pnnx.bin", WEIGHTS, EXTRA_ENTRIES_ALLOWED)
    np.testing.assert_array_equal(kuiper.load(param)(X), EXPECTED)


def test_the_weight_archive_reads_real_zip64_exports_with_every_check(tmp_path):
    param = MODELS / "flatten_linear" / "model.pnnx.param"
    ir = load_pnnx(param)
    with WeightArchive(param.with_name("model.pnnx.bin")) as archive:
        assert sorted(archive.names()) == sorted(f"{op.name}.{key}" for op in ir.ops for key in op.attrs)


# -- 3 and 8: special files and paths -----------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_3_a_fifo_as_param_or_bin_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "f.pnnx.param"
    os.mkfifo(fifo)
    with pytest.raises(ModelFormatError, match="model file is a FIFO; expected a regular file"):
        kuiper.load(fifo)
    param = write_model(tmp_path, LINEAR)
    os.mkfifo(tmp_path / "m.pnnx.bin")
    with pytest.raises(ModelFormatError, match="weight file is a FIFO"):
        kuiper.load(param)


def test_8_symlink_loops_and_over_long_paths_are_model_format_errors(tmp_path):
    (tmp_path / "a.pnnx.param").symlink_to(tmp_path / "b.pnnx.param")
    (tmp_path / "b.pnnx.param").symlink_to(tmp_path / "a.pnnx.param")
    with pytest.raises(ModelFormatError, match="symbolic links"):
        kuiper.load(tmp_path / "a.pnnx.param")
    with pytest.raises(ModelFormatError, match="too long") as info:
        kuiper.load(tmp_path / ("x" * 5000 + ".pnnx.param"))
    assert len(str(info.value)) < 400  # the path is shortened in the message
    with pytest.raises(ModelFormatError, match="is a directory"):
        load_pnnx(tmp_path)


# -- 3: file-declared counts checked before looping ---------------------------------------


@pytest.mark.parametrize(
    "line, shape, message",
    [
        (("nn.MaxPool2d p 1 1 x y kernel_size=(2147483647,2147483647) stride=(1,1) padding=(0,0) dilation=(1,1) "
          "ceil_mode=False return_indices=False"), (1, 1, 4, 4), "'kernel_size' must be between 1 and 65536"),
        ("nn.AdaptiveMaxPool1d p 1 1 x y output_size=2147483647 return_indices=False", (1, 1, 4),
         "'output_size' must be 1 positive integer"),
        ("nn.AdaptiveAvgPool2d p 1 1 x y output_size=(2147483647,1)", (1, 1, 4, 4), "'output_size'"),
        ("torch.tensor_split p 1 1 x y sections=2147483647 dim=1", (1, 4),
         "sections=2147483647 makes 2147483647 pieces, the file declares 1 output"),
        (("nn.AvgPool2d p 1 1 x y kernel_size=(2147483647,1) stride=(1,1) padding=(0,0) ceil_mode=False "
          "count_include_pad=True divisor_override=None"), (1, 1, 4, 4), "'kernel_size' must be between"),
        (("nn.MaxPool2d p 1 1 x y kernel_size=(2,2) stride=(99999999999999999999,2) padding=(0,0) dilation=(1,1) "
          "ceil_mode=False return_indices=False"), (1, 1, 4, 4), "'stride' must be between"),
    ],
)
def test_3_declared_counts_are_bounded_before_any_loop(tmp_path, line, shape, message):
    with pytest.raises(OperatorParamError, match=message):
        op_model(tmp_path, line)(np.zeros(shape, np.float32))


def test_3_a_max_pool_larger_than_its_input_is_a_shape_error(tmp_path):
    model = op_model(tmp_path, "nn.MaxPool2d p 1 1 x y kernel_size=(5,5) stride=(1,1) padding=(0,0) dilation=(1,1) "
                               "ceil_mode=False return_indices=False")
    with pytest.raises(ShapeError, match="too small for kernel_size"):
        model(np.zeros((1, 1, 4, 4), np.float32))


# -- 4: the size budget ------------------------------------------------------------------


def test_4_budget_comes_from_the_environment_then_the_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KUIPER_MEMORY_BUDGET", raising=False)
    (tmp_path / "kuiper.toml").write_text('memory_budget = "3MiB"\n')
    assert budget_bytes() == 3 * 2**20
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "2GB")
    assert budget_bytes() == 2 * 10**9
    assert parse_size(4096, "x") == 4096
    for bad in ("", "-1", "lots", "1e999", "12 parsecs"):
        with pytest.raises(kuiper.ConfigError, match="expected a positive size"):
            parse_size(bad, "KUIPER_MEMORY_BUDGET")


@pytest.mark.parametrize(
    "line, shape, weights",
    [
        ("F.upsample_nearest p 1 1 x y size=(1000000000,1)", (1, 1, 2, 2), None),
        ("F.interpolate p 1 1 x y scale_factor=(100000.0,100000.0) mode=nearest", (1, 1, 2, 2), None),
        (conv_line(kernel_size="(1,1)", padding="(100000,100000)"), (1, 1, 4, 4), {"weight": np.ones((1, 1, 1, 1))}),
        ("nn.ConstantPad2d p 1 1 x y padding=(100000,100000,100000,100000) value=0.0", (1, 1, 2, 2), None),
        ("Tensor.repeat p 1 1 x y sizes=(100000,100000)", (1, 4), None),
        ("torch.tile p 1 1 x y dims=(100000,100000)", (1, 4), None),
        ("torch.repeat_interleave p 1 1 x y repeats=100000000000", (1, 4), None),
        ("nn.AdaptiveAvgPool2d p 1 1 x y output_size=(100000,100000)", (1, 2, 7, 5), None),  # found by the fuzzer
        ("nn.AdaptiveMaxPool2d p 1 1 x y output_size=(100000,100000) return_indices=False", (1, 2, 7, 5), None),
        ("torch.diag p 1 1 x y diagonal=100000", (4,), None),  # (n + |diagonal|) squared
    ],
)
def test_4_huge_allocations_are_refused_by_the_budget(tmp_path, small_budget, line, shape, weights):
    model = op_model(tmp_path, line, weights=weights)
    with pytest.raises(SizeLimitError, match=r"over the size budget of 64 MiB \(raise it with KUIPER_MEMORY_BUDGET"):
        model(np.zeros(shape, np.float32))


def test_4_a_run_keeps_the_budget_it_began_with(tmp_path, monkeypatch):
    """A model reads the budget once per run (its ops then skip the environment read): a budget
    lowered while a run goes on applies from the next run, which refuses the same upsample."""
    from kuiper.graph.plan import StepObserver

    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "64MiB")
    model = op_model(tmp_path, "F.upsample_nearest p 1 1 x y size=(1024,1024)")  # a 4 MiB output

    class LowersTheBudget(StepObserver):
        def before_step(self, node, inputs):
            monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "1MiB")

    out = model(np.ones((1, 1, 2, 2), np.float32), observer=LowersTheBudget())
    assert out.shape == (1, 1, 1024, 1024) and budget_bytes() == 2**20
    with pytest.raises(SizeLimitError, match=r"over the size budget of 1 MiB"):
        model(np.ones((1, 1, 2, 2), np.float32))


def test_6_a_list_where_arange_expects_a_dtype_name_is_an_unsupported_param_error(tmp_path):
    """Found by the fuzzer (2026-11-23): `dtype=(0)` parses as a list, and a dict lookup raised TypeError."""
    with pytest.raises(UnsupportedOperatorError, match=r"dtype=\[0\] is not supported"):
        op_model(tmp_path, "torch.arange p 0 1 y dtype=(0) end=4", inputs=())


# 2^40 and 2^63 - 1, not the fuzzer's 2^31 - 1: if this breaks again, NumPy refuses these at
# once instead of filling 8 GiB of ones on the test machine.
@pytest.mark.parametrize("width", [1 << 40, 9223372036854775807])
def test_4_a_declared_layer_norm_shape_allocates_nothing_at_load(tmp_path, width):
    """Found by the fuzzer (2026-11-23): the compiled layer norm made ones/zeros rows of
    prod(normalized_shape) at build, 8 GiB for 2^31 - 1; the process was OOM-killed."""
    import tracemalloc

    text = ("7767517\n3 2\npnnx.Input in 0 1 0 #0=(1,4,7)f32\n"
            f"nn.LayerNorm op 1 1 0 1 elementwise_affine=False eps=0.001 normalized_shape={width} "
            "#0=(1,4,7)f32 #1=(1,4,7)f32\npnnx.Output out 1 0 1 #1=(1,4,7)f32\n")
    tracemalloc.start()
    try:
        model = kuiper.load(write_model(tmp_path, text))
        with pytest.raises(KuiperError):
            model(np.zeros((1, 4, 7), np.float32))  # the input is not of the normalised shape
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_4_a_huge_batch_is_refused_before_the_first_op(tmp_path, monkeypatch):
    model = kuiper.load(MODELS / "conv2d_depthwise" / "model.pnnx.param")
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "4MiB")
    # Declared (1,8,7,7) f32 = 1568 bytes per image: up to 2675 images fit in 4 MiB.
    model(np.zeros((100, 4, 7, 7), np.float32))
    with pytest.raises(SizeLimitError, match="input '0' has batch 3000 .* operand '1' would need about 4.49 MiB"):
        model(np.zeros((3000, 4, 7, 7), np.float32))


def test_4_a_model_exported_with_a_large_batch_runs_that_batch(tmp_path, monkeypatch):
    """Issue 49: the frontend frees each input's dim 0, but the other operands keep the exported batch;
    the budget scales them by the fed batch over that exported batch, not over 1."""
    param = write_model(tmp_path, "7767517\n3 2\npnnx.Input in0 0 1 x #x=(40000,1)f32\n"
                                  "nn.LayerNorm ln 1 1 x y elementwise_affine=False eps=1e-05 normalized_shape=(1) "
                                  "#x=(40000,1)f32 #y=(40000,1)f32\npnnx.Output out 1 0 y\n")
    model = kuiper.load(param)
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "1MiB")
    # (40000, 1) f32 is 156 KiB: before, 40000 * 156 KiB = 5.96 GiB was asked of the budget.
    assert np.asarray(model(np.ones((40000, 1), np.float32))).shape == (40000, 1)
    with pytest.raises(SizeLimitError, match="input 'x' has batch 400000 \\(declared 40000\\); operand 'y' would "
                                             "need about 1.53 MiB"):
        model(np.ones((400000, 1), np.float32))


# -- 6 and 7: values that used to escape as ValueError/TypeError/OverflowError -----------


@pytest.mark.parametrize(
    "item, message",
    [
        ("expr=add(@0," + "9" * 5000 + ")", "holds a number longer than 400 digits"),
        ("expr=add(@0,@" + "9" * 5000 + ")", "holds a number longer than 400 digits"),
        ("k=" + "9" * 5000, "param 'k': the number"),
        ("@w=(" + "9" * 30 + ")f32", r"a dimension is too large: 9{20}\.\.\. \(at most 1099511627776\)"),
        ("@w=(0,18446744073709551616)f32", r"a dimension is too large: 18446744073709551616 \(at most 1099511627776\)"),
        ("#x=(1," + "9" * 5000 + ")f32", "is too large"),
    ],
)
def test_6_oversized_numbers_are_format_errors_with_the_line(tmp_path, item, message):
    text = f"7767517\n2 1\npnnx.Input in0 0 1 x\npnnx.Expression e 1 0 x {item}\n"
    with pytest.raises(ModelFormatError, match=r"m\.pnnx\.param:4: .*" + message):
        kuiper.load(write_model(tmp_path, text))


def test_6_zero_out_channels_and_zero_size_kernels_are_refused(tmp_path):
    for weight_shape, params in [((0, 1, 3, 3), {"out_channels": 0}), ((1, 1, 0, 0), {"kernel_size": "(0,0)"})]:
        with pytest.raises(OperatorParamError, match="weight has a zero-size dimension"):
            op_model(tmp_path, conv_line(**params), weights={"weight": np.ones(weight_shape)})


def test_6_a_list_valued_gelu_approximate_is_an_unsupported_value(tmp_path):
    with pytest.raises(UnsupportedOperatorError, match=r"approximate=\[0\] is not supported"):
        op_model(tmp_path, "nn.GELU g 1 1 x y approximate=(0)")


@pytest.mark.parametrize("token, fed", [("bf16", np.float32), ("c32", np.complex64)])
def test_7_bf16_and_c32_inputs_run_one_size_wider(tmp_path, token, fed):
    text = f"7767517\n2 1\npnnx.Input in0 0 1 x #x=(1,2){token}\npnnx.Output out 1 0 x\n"
    model = kuiper.load(write_model(tmp_path, text))
    assert model.inputs[0].dtype == np.dtype(fed).name
    np.testing.assert_array_equal(kuiper.to_numpy(model(np.array([[1.5, -2]], fed))), [[1.5, -2]])


def test_7_huge_scale_factors_and_strides_are_param_errors(tmp_path):
    with pytest.raises(OperatorParamError, match="'scale_factor' must be positive number"):
        op_model(tmp_path, "F.interpolate p 1 1 x y scale_factor=(1e308,1e308) mode=nearest")
    with pytest.raises(OperatorParamError, match="stride .* must be at most 2147483647"):
        op_model(tmp_path, conv_line(kernel_size="(1,1)", stride="(99999999999999999999,1)"),
                 weights={"weight": np.ones((1, 1, 1, 1))})


def test_7_max_pooling_an_int32_input_pads_with_the_smallest_int(tmp_path):
    model = op_model(tmp_path, "nn.MaxPool2d p 1 1 x y kernel_size=(2,2) stride=(2,2) padding=(1,1) dilation=(1,1) "
                               "ceil_mode=False return_indices=False")
    x = -np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4) - 100
    out = kuiper.to_numpy(model(x))
    # Output (i, j) covers rows/cols {2i-1, 2i} of x (the pad never wins); x falls along rows and columns.
    expected = np.array([[-100, -101, -103], [-104, -105, -107], [-112, -113, -115]], np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out[0, 0], expected)


# -- 11: strict, lossless parsing ---------------------------------------------------------


@pytest.mark.parametrize(
    "line, message",
    [
        ("nn.ReLU r 1 1 x y a=1 a=2", "param 'a' is given twice"),
        ("nn.ReLU r 1 1 x y @w=(1)f32 @w=(1)f32", "weight '@w' is declared twice"),
    ],
)
def test_11_duplicate_items_on_one_line(tmp_path, line, message):
    text = f"7767517\n3 2\npnnx.Input in0 0 1 x\n{line}\npnnx.Output out 1 0 y\n"
    with pytest.raises(ModelFormatError, match=":4: op 'r': " + message):
        load_pnnx(write_model(tmp_path, text))


def test_11_unknown_params_warn_once_listing_them_and_strict_refuses(tmp_path):
    junk = " ".join(f"junk{i}=1" for i in range(20000))
    text = f"7767517\n3 2\npnnx.Input in0 0 1 x\nnn.ReLU r 1 1 x y inplace=False {junk}\npnnx.Output out 1 0 y\n"
    param = write_model(tmp_path, text)
    with pytest.warns(UnknownParamWarning) as record:
        model = kuiper.load(param)
    assert len(record) == 1
    message = str(record[0].message)
    assert ":4: op 'r' (nn.ReLU): junk0, junk1" in message and "and 19992 more" in message
    assert "inplace" not in message  # a param nn.ReLU does have
    np.testing.assert_array_equal(model(np.array([-1.0, 2.0], np.float32)), [0.0, 2.0])
    with pytest.raises(OperatorParamError, match="strict=True refuses unknown params"):
        kuiper.load(param, strict=True)


def test_11_every_fixture_model_loads_strictly():
    for param in sorted(MODELS.glob("*/model.pnnx.param")):
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnknownParamWarning)
            load_pnnx(param, strict=True)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"kernel_size": "(3,5)"}, r"'kernel_size' \(3, 5\) contradicts the weight's kernel \(3, 3\)"),
        ({"kernel_size": "(-3,3)"}, r"'kernel_size' \(-3, 3\) contradicts"),
        ({"kernel_size": "(3,x)"}, "'kernel_size' must be a list of integers"),
        ({"in_channels": 2}, "'in_channels'=2 contradicts the weight, which has 1"),
        ({"out_channels": 2}, "'out_channels'=2 contradicts the weight, which has 1"),
    ],
)
def test_11_conv_params_contradicting_the_weight(tmp_path, params, message):
    with pytest.raises(OperatorParamError, match=message):
        op_model(tmp_path, conv_line(**params), weights={"weight": np.ones((1, 1, 3, 3))})


def test_11_linear_in_features_contradicting_the_weight(tmp_path):
    with pytest.raises(OperatorParamError, match=r"'in_features'=4 contradicts @weight of shape \(2, 3\)"):
        op_model(tmp_path, "nn.Linear l 1 1 x y in_features=4 out_features=2 bias=False",
                 weights={"weight": np.ones((2, 3))})


@pytest.mark.parametrize("fuse", [True, False])
def test_11_a_relu_with_two_inputs_is_refused_fused_or_not(tmp_path, fuse):
    with pytest.raises(OperatorParamError, match="expects 1 input"):
        op_model(tmp_path, "nn.ReLU r 2 1 x x2 y", inputs=("x", "x2"), fuse=fuse)


@pytest.mark.parametrize("mode, match", [("reflect", "reflect padding"), ("circular", "circular padding")])
def test_11_conv_padding_wider_than_the_input_in_reflect_and_circular_modes(tmp_path, mode, match):
    model = op_model(tmp_path, conv_line(kernel_size="(1,1)", padding="(5,5)", padding_mode=mode),
                     weights={"weight": np.ones((1, 1, 1, 1))})
    with pytest.raises(ShapeError, match=match + r" \(5, 5\) is too wide for dim 2 of size 2"):
        model(np.zeros((1, 1, 2, 2), np.float32))


# -- 10: the command line -----------------------------------------------------------------


def _cli(capsys, *argv):
    from kuiper.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's exit for usage errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["run"], 2, "the following arguments are required: model"),
        (["bogus"], 2, "invalid choice: 'bogus'"),
        (["run", "{model}", "--random", "--batch", "-3"], 2, "expected a positive integer, found -3"),
        (["run", "{model}", "-i", "{tmp}/objects.npz"], 1, "Object arrays cannot be loaded"),
        (["run", "{model}", "-i", "{tmp}/truncated.npz"], 1, "cannot read a .npy/.npz file"),
        (["run", "{model}", "-i", "{tmp}/missing.npy"], 1, "input file not found"),
        (["run", "{model}", "--random", "-o", "{tmp}/no/such/folder/y.npy"], 1, "does not exist"),
        (["run", "{model}", "--random", "-o", "{tmp}"], 1, "is a directory"),
        (["info", "{tmp}/nothing.pnnx.param"], 1, "model file not found"),
        (["bench", "{model}", "--batch", "0"], 2, "--batch and --runs must be at least 1"),
        (["run", "{model}", "--inputs", "{tmp}/*.npy"], 2, "--inputs and --output-dir go together"),
    ],
)
def test_10_bad_invocations_print_one_error_line(tmp_path, capsys, argv, code, message):
    np.savez(tmp_path / "objects.npz", x=np.array([1, "a", None], dtype=object))
    (tmp_path / "truncated.npz").write_bytes((tmp_path / "objects.npz").read_bytes()[:50])
    model = str(MODELS / "flatten_linear" / "model.pnnx.param")
    argv = [a.format(model=model, tmp=tmp_path) for a in argv]
    got_code, err = _cli(capsys, *argv)
    assert got_code == code
    assert err.startswith("kuiper: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err


def test_10_output_is_written_to_exactly_the_path_given(tmp_path, capsys):
    model = str(MODELS / "flatten_linear" / "model.pnnx.param")
    code, _ = _cli(capsys, "run", model, "--random", "-o", str(tmp_path / "result"))
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result"]
    assert np.load(tmp_path / "result").shape[0] == 1


def test_every_error_raised_here_is_a_kuiper_error():
    for cls in (InputError, ModelFormatError, OperatorParamError, ShapeError, SizeLimitError):
        assert issubclass(cls, KuiperError)


def test_4_a_transposed_convolution_with_a_huge_stride_is_refused_by_the_budget(tmp_path, small_budget):
    line = ("nn.ConvTranspose2d t 1 1 x y in_channels=1 out_channels=1 kernel_size=(1,1) stride=(100000,100000) "
            "padding=(0,0) output_padding=(0,0) dilation=(1,1) groups=1 bias=False")
    model = op_model(tmp_path, line, weights={"weight": np.ones((1, 1, 1, 1))})
    with pytest.raises(SizeLimitError, match=r"shape \(1, 1, 300001, 300001\)"):
        model(np.zeros((1, 1, 4, 4), np.float32))


def test_4_a_file_declaring_an_operand_over_the_budget_is_refused_when_built(tmp_path, small_budget):
    text = ("7767517\n3 2\npnnx.Input in0 0 1 x #x=(1,2)f32\n"
            "Tensor.expand e 1 1 x y sizes=(100000,100000) #y=(100000,100000)f32\npnnx.Output out 1 0 y\n")
    with pytest.raises(SizeLimitError, match=r"operand 'y' as declared: .* needs 37\.3 GiB"):
        kuiper.load(write_model(tmp_path, text))


@pytest.mark.parametrize(
    "line",
    ["torch.cat o 2 1 x c y dim=0", "nn.Softmax o 1 1 c y dim=0",
     "nn.LayerNorm o 1 1 c y normalized_shape=(2) eps=1e-05 elementwise_affine=False"],
)
def test_7_a_scalar_expression_feeding_a_tensor_op_names_the_op(tmp_path, line):
    ops = ["pnnx.Input in0 0 1 x", "pnnx.Expression e 0 1 c expr=0", line, "pnnx.Output out 1 0 y"]
    model = kuiper.load(write_model(tmp_path, "7767517\n4 3\n" + "\n".join(ops) + "\n"))
    with pytest.raises(KuiperError, match="op 'o' of type"):
        model(np.ones((1, 2), np.float32))


def test_11_the_cli_strict_flag_refuses_unknown_params(tmp_path, capsys):
    text = "7767517\n3 2\npnnx.Input in0 0 1 x\nnn.ReLU r 1 1 x y frobnicate=1\npnnx.Output out 1 0 y\n"
    param = str(write_model(tmp_path, text))
    code, err = _cli(capsys, "info", param, "--strict")
    assert code == 1 and "op 'r' (nn.ReLU): frobnicate" in err
    with pytest.warns(UnknownParamWarning):
        code, _ = _cli(capsys, "info", param)
    assert code == 0


@pytest.mark.parametrize(
    "line, weight_shape, expected",
    [
        # PyTorch's sizes: (9 + 2*1 - 3) // 2 + 1 = 5 and (11 + 2 - 3) // 2 + 1 = 6
        (conv_line(out_channels=2, stride="(2,2)", padding="(1,1)"), (2, 1, 3, 3), (0, 2, 5, 6)),
        # transposed: (9 - 1) * 2 + 3 = 19 and (11 - 1) * 2 + 3 = 23
        (("nn.ConvTranspose2d t 1 1 x y in_channels=1 out_channels=2 kernel_size=(3,3) stride=(2,2) padding=(0,0) "
          "output_padding=(0,0) dilation=(1,1) groups=1 bias=False"), (1, 2, 3, 3), (0, 2, 19, 23)),
    ],
)
def test_an_empty_batch_gives_an_empty_batch_like_pytorch(tmp_path, line, weight_shape, expected):
    # Found by the one-hour fuzz: an empty batch failed inside a reshape.
    model = op_model(tmp_path, line, weights={"weight": np.ones(weight_shape)})
    assert kuiper.to_numpy(model(np.zeros((0, 1, 9, 11), np.float32))).shape == expected
