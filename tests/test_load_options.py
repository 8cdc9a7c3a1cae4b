"""kuiper.load's options: threads per model, models from memory (bytes, file objects)."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import kuiper
from kuiper import thread_limits
from kuiper.errors import ConfigError, KuiperError, ModelFormatError
from kuiper.numba_kernels import runtime

from conftest import MODELS, reference_batches

RESNET = MODELS / "resnet18_w8" / "model.pnnx.param"
RESNET_BIN = RESNET.with_name("model.pnnx.bin")


_NUMPY_DIR = Path(np.__file__).resolve().parent
_NUMPY_WHEEL_LIBS = (_NUMPY_DIR, _NUMPY_DIR.with_name("numpy.libs"))


def blas_threads() -> list[int]:
    """Threads of each BLAS pool NumPy calls, the pools kuiper caps: the one NumPy's wheel ships
    (numpy.libs), or, for a NumPy built on a system BLAS, every BLAS pool.  Another library's own
    BLAS, loaded later in the same process (torch's, by a GPU test), is not NumPy's."""
    pools = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    numpys = [pool for pool in pools
              if any(Path(pool["filepath"]).resolve().is_relative_to(folder) for folder in _NUMPY_WHEEL_LIBS)]
    return [pool["num_threads"] for pool in numpys or pools]


class ThreadsSeen(kuiper.StepObserver):
    """What the thread settings are while the model's steps run."""

    def __init__(self):
        self.requested, self.blas, self.kernels = set(), set(), set()

    def before_step(self, node, inputs):
        self.requested.add(thread_limits.requested())
        self.blas.update(blas_threads())
        if runtime.available():
            self.kernels.add(runtime.threads())


# ------------------------------------------------------------------ threads


def test_threads_caps_blas_and_the_compiled_kernels_during_each_run_only():
    model = kuiper.load(RESNET, threads=1)
    assert model.threads == 1
    before = blas_threads()
    seen = ThreadsSeen()
    data = reference_batches("resnet18_w8")["b1"]
    got = model(*data["inputs"], observer=seen, to_numpy=True)
    assert seen.requested == {1}
    assert seen.blas == ({1} if before else set())  # every BLAS library NumPy loaded
    assert seen.kernels == ({1} if runtime.available() else set())
    assert blas_threads() == before and thread_limits.requested() is None  # restored after the run
    np.testing.assert_allclose(got, data["outputs"][0], atol=1e-4)


def test_without_threads_nothing_is_capped():
    model = kuiper.load(RESNET)
    seen = ThreadsSeen()
    model(np.zeros((1, 3, 64, 64), np.float32), observer=seen)
    assert model.threads is None and seen.requested == {None}


def test_load_hlo_takes_threads_as_load_does():
    text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x)\n}\n"
    model = kuiper.load_hlo(text, threads=2)
    assert model.threads == 2
    np.testing.assert_array_equal(model(np.float32([1, -2]), to_numpy=True), [-1, 2])
    with pytest.raises(ConfigError, match="threads must be a whole number"):
        kuiper.load_hlo(text, threads=0)


def test_threads_survive_pickling():
    model = kuiper.load(RESNET, threads=2)
    assert pickle.loads(pickle.dumps(model)).threads == 2


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_threads_that_are_not_a_positive_whole_number_are_a_config_error(value):
    with pytest.raises(ConfigError, match=r"threads=.*threads must be a whole number of at least 1"):
        kuiper.load(RESNET, threads=value)


# ------------------------------------------------------------------ from memory


def outputs_of(model):
    data = reference_batches("resnet18_w8")["b1"]
    return model(*data["inputs"], to_numpy=True)


def test_a_pnnx_model_loads_from_bytes_with_the_same_results():
    expected = outputs_of(kuiper.load(RESNET))
    model = kuiper.load(RESNET.read_bytes(), bin_path=RESNET_BIN.read_bytes())
    np.testing.assert_array_equal(outputs_of(model), expected)
    assert model.source == "<model in memory>"


def test_a_pnnx_model_loads_from_binary_file_objects():
    expected = outputs_of(kuiper.load(RESNET))
    with open(RESNET, "rb") as param, open(RESNET_BIN, "rb") as weights:
        model = kuiper.load(param, bin_path=weights)
    np.testing.assert_array_equal(outputs_of(model), expected)
    assert model.source == str(RESNET)  # an open file names itself in messages
    from_buffers = kuiper.load(io.BytesIO(RESNET.read_bytes()), bin_path=io.BytesIO(RESNET_BIN.read_bytes()))
    np.testing.assert_array_equal(outputs_of(from_buffers), expected)


def test_weights_from_memory_beside_a_param_path():
    model = kuiper.load(RESNET, bin_path=RESNET_BIN.read_bytes())
    np.testing.assert_array_equal(outputs_of(model), outputs_of(kuiper.load(RESNET)))


def test_a_model_with_weights_from_memory_needs_its_weights():
    with pytest.raises(ModelFormatError, match=r"<model in memory>: the model declares weights; pass bin_path="):
        kuiper.load(RESNET.read_bytes())


def test_a_model_without_weights_loads_from_bytes_alone():
    text = b"7767517\n3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.ReLU r 1 1 x y\npnnx.Output o 1 0 y\n"
    model = kuiper.load(text)
    np.testing.assert_array_equal(model(np.float32([[-1, 0, 2]]), to_numpy=True), [[0, 0, 2]])


def test_a_text_mode_file_is_refused_with_the_mode_to_use():
    with open(RESNET) as param, pytest.raises(ModelFormatError, match=r"not bytes; open it in binary mode"):
        kuiper.load(param, bin_path=RESNET_BIN.read_bytes())


def test_corrupt_weights_in_memory_are_a_model_format_error():
    with pytest.raises(ModelFormatError, match=r"<weight file in memory>: .*zip"):
        kuiper.load(RESNET.read_bytes(), bin_path=b"PK not really a zip archive" * 3)


def test_a_frontend_that_reads_only_files_says_so():
    with pytest.raises(ModelFormatError, match=r"<model in memory>: the hlo frontend reads files only, not a model's bytes"):
        kuiper.load(b"HloModule m", format="hlo")


def test_bytes_no_frontend_recognises_are_a_model_format_error():
    with pytest.raises(ModelFormatError, match=r"no installed frontend recognises these bytes as a model; pass format="):
        kuiper.load(b"\x00\x01 not a model")


def test_format_pnnx_reads_the_bytes_as_pnnx():
    text = b"7767517\n3 2\npnnx.Input i 0 1 x #x=(1,3)f32\nnn.Tanh t 1 1 x y\npnnx.Output o 1 0 y\n"
    assert kuiper.load(text, format="pnnx").steps[0].node.type == "Tanh"
    with pytest.raises(ModelFormatError, match=r"<model in memory>:1: bad magic number .not pnnx. \(expected 7767517\)"):
        kuiper.load(b"not pnnx", format="pnnx")


def test_a_model_loaded_from_memory_does_not_pickle():
    model = kuiper.load(RESNET.read_bytes(), bin_path=RESNET_BIN.read_bytes())
    with pytest.raises(KuiperError, match="cannot be pickled"):
        pickle.dumps(model)


def test_a_folder_loads_the_one_model_file_in_it_preferring_pnnx_param_over_other_param_files(tmp_path):
    import shutil

    folder = tmp_path / "export"
    shutil.copytree(MODELS / "conv2d_same", folder)
    (folder / "model.ncnn.param").write_text("7767517\n")  # what pnnx writes beside its own files
    reference = np.load(folder / "ref.npz")
    got = kuiper.load(folder)(reference["b1_input0"], to_numpy=True)
    np.testing.assert_allclose(got, reference["b1_output0"], atol=1e-4)


def test_a_folder_with_no_model_file_or_two_alike_names_what_it_found(tmp_path):
    with pytest.raises(ModelFormatError, match=r"no model file an installed frontend reads"):
        kuiper.load(tmp_path)
    for name in ("a.pnnx.param", "b.pnnx.param"):
        (tmp_path / name).write_text("7767518\n0 0\n")
    with pytest.raises(ModelFormatError, match=r"several model files \(a.pnnx.param, b.pnnx.param\)"):
        kuiper.load(tmp_path)


def test_a_folder_that_cannot_be_read_is_a_model_format_error(tmp_path, monkeypatch):
    from pathlib import Path

    def refuse(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(ModelFormatError, match=r"the folder cannot be read \(Permission denied\)"):
        kuiper.load(tmp_path)
