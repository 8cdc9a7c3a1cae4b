"""The CuPy backend on a real GPU (issue 28): feeds from other libraries, outputs that stay on the
device, no host synchronisation inside a call, one kernel launch per fused chain, and running out of
GPU memory as a DeviceMemoryError.  Every test skips, with the reason, where the cupy backend is
unavailable (no CuPy, or no GPU), as in CI; tools/gpu_validate.py runs them on a GPU machine."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.backends import backend_infos
from kuiper.errors import DeviceMemoryError

from conftest import assert_close_to_pytorch, model_dir, op_model, param_text, reference_batches, write_model

_CUPY = {info.name: info for info in backend_infos()}["cupy"]
pytestmark = pytest.mark.skipif(not _CUPY.available, reason=f"backend 'cupy' unavailable: {_CUPY.reason}")

# Fixtures whose ops cover convolutions, pooling, residual adds, concatenation, split, upsampling,
# the YOLO head's grid arithmetic, LayerNorm and attention.
NO_SYNC_MODELS = ["resnet18_w8", "mobilenet_v2", "yolov5_style", "vit_block", "attention_mha"]


@pytest.fixture
def cupy():
    import cupy

    yield cupy
    cupy.get_default_memory_pool().free_all_blocks()


def _first_batch(name):
    batches = reference_batches(name)
    batch = batches["b1"] if "b1" in batches else next(iter(batches.values()))
    return batch["inputs"], batch["outputs"]


class _DLPackOnly:
    """An array from a library kuiper does not know, offering nothing but the DLPack protocol."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class _CudaArrayInterfaceOnly:
    """Likewise, offering only ``__cuda_array_interface__`` (as Numba's and PyCUDA's arrays do)."""

    def __init__(self, array):
        self._array = array  # keeps the memory alive
        self.__cuda_array_interface__ = array.__cuda_array_interface__


@pytest.mark.parametrize("wrap", ["cupy", "dlpack", "cuda_array_interface"])
def test_device_feeds_give_the_pytorch_answer_and_the_output_stays_on_the_gpu(cupy, wrap):
    (x,), (want,) = _first_batch("resnet18_w8")
    model = kuiper.load(model_dir("resnet18_w8") / "model.pnnx.param", backend="cupy")
    on_gpu = cupy.asarray(x)
    wrappers = {"cupy": lambda a: a, "dlpack": _DLPackOnly, "cuda_array_interface": _CudaArrayInterfaceOnly}
    feed = wrappers[wrap](on_gpu)
    out = model(feed)
    assert isinstance(out, cupy.ndarray)
    assert_close_to_pytorch(cupy.asnumpy(out), want, f"resnet18_w8 fed as {wrap}")


def test_a_torch_cuda_tensor_is_fed_without_a_copy_through_the_host(cupy):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    (x,), (want,) = _first_batch("resnet18_w8")
    model = kuiper.load(model_dir("resnet18_w8") / "model.pnnx.param", backend="cupy")
    out = model(torch.from_numpy(x).cuda())
    assert isinstance(out, cupy.ndarray)
    assert_close_to_pytorch(cupy.asnumpy(out), want, "resnet18_w8 fed a torch CUDA tensor")


_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@pytest.mark.parametrize("name", NO_SYNC_MODELS)
def test_a_call_queues_its_work_without_waiting_for_the_gpu(cupy, name):
    """A kernel that keeps the GPU busy for a second is queued first; if the model's call waited
    for the device anywhere (a value read back, a synchronize), the stream would be idle after it."""
    inputs, outputs = _first_batch(name)
    model = kuiper.load(model_dir(name) / "model.pnnx.param", backend="cupy")
    feeds = [cupy.asarray(x) for x in inputs]
    model(*feeds)  # warm: kernels compiled, memory pooled
    stream = cupy.cuda.get_current_stream()
    stream.synchronize()
    clock_khz = cupy.cuda.Device().attributes["ClockRate"]
    spin = cupy.RawKernel(_SPIN, "spin")
    spin((1,), (1,), (np.int64(clock_khz * 1000),))  # about one second at the peak clock
    result = model(*feeds)
    still_busy = not stream.done
    stream.synchronize()
    assert still_busy, f"{name}: the call returned only after the GPU had finished (a host synchronisation)"
    result = result if isinstance(result, tuple) else (result,)
    for got, want in zip(result, outputs):
        assert isinstance(got, cupy.ndarray)
        assert_close_to_pytorch(cupy.asnumpy(got), want, f"{name} queued")


CHAIN = """
pnnx.Input in0 0 1 x #x=(8,4096)f32
nn.Sigmoid s 1 1 x a
nn.Tanh t 1 1 a b
nn.SiLU u 1 1 b c
nn.Hardswish h 1 1 c d
nn.ReLU r 1 1 d y
pnnx.Output out 1 0 y
"""


def _kernels_launched(torch, call) -> int:
    """CUDA kernels the profiler (CUPTI) saw while ``call`` ran: every library's launches count."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as recorded:
        call()
        torch.cuda.synchronize()
    return sum(1 for event in recorded.events() if event.device_type == torch.autograd.DeviceType.CUDA)


@pytest.mark.parametrize("fuse", [True, False])
def test_a_fused_chain_is_one_kernel_launch(cupy, tmp_path, fuse):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("the kernel count needs torch's CUDA profiler")
    model = kuiper.load(write_model(tmp_path, param_text(CHAIN)), backend="cupy", fuse=fuse)
    x = cupy.asarray(np.linspace(-4, 4, 8 * 4096, dtype=np.float32).reshape(8, 4096))
    model(x)
    cupy.cuda.get_current_stream().synchronize()
    launches = _kernels_launched(torch, lambda: model(x))
    assert launches == (1 if fuse else 5)
    # The same chain in float64 NumPy, op by op.
    v = np.asarray(cupy.asnumpy(x), np.float64)
    v = 1 / (1 + np.exp(-v))
    v = np.tanh(v)
    v = v / (1 + np.exp(-v))
    v = v * np.clip(v + 3, 0, 6) / 6
    assert_close_to_pytorch(cupy.asnumpy(model(x)), np.maximum(v, 0), f"the chain, fuse={fuse}")


def test_running_out_of_gpu_memory_is_a_device_memory_error_naming_free_and_total(cupy, tmp_path, monkeypatch):
    # kuiper's own size budget (a quarter of host memory) would refuse the batch first; lift it.
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "4TiB")
    width = 1 << 20
    model = op_model(tmp_path, f"nn.Linear fc 1 1 x y bias=False in_features=1 out_features={width}",
                     weights={"weight": np.ones((width, 1), np.float32)}, backend="cupy")
    free, total = cupy.cuda.runtime.memGetInfo()
    batch = 2 * free // (4 * width) + 1  # an output of twice the free memory
    with pytest.raises(DeviceMemoryError, match=r"MiB free of [0-9,]+ MiB on the GPU"):
        model(cupy.ones((batch, 1), np.float32))
    # Nothing is lost: the model runs again at a sane batch.
    assert model(cupy.ones((2, 1), np.float32)).shape == (2, width)

