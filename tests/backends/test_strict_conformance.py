"""Every PNNX and HLO fixture on a backend whose namespace is array-api-strict, the standard's reference
implementation, held to the same references as the NumPy backend (PyTorch's and JAX's saved outputs).

array-api-strict refuses everything the standard does not define (NumPy's dtype attributes, ``out=``,
``astype`` methods, index arrays beside slices, implicit trailing axes), so an op, a graph pass or a
piece of the IR that leans on NumPy fails here the day it is written.  The backend
(strict_backend.py) is a namespace and arrays in and out; its primitives are kuiper's defaults,
written in the standard.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

array_api_strict = pytest.importorskip("array_api_strict", reason="array-api-strict is in the test extra")

import kuiper  # noqa: E402
from kuiper import plugins  # noqa: E402
from kuiper.errors import UnsupportedOperatorError  # noqa: E402

from conftest import MODELS, assert_close_to_pytorch, float64_outputs, reference_batches  # noqa: E402
from strict_backend import ARRAY, StrictBackend, StrictPlugin  # noqa: E402

HLO = Path(__file__).parents[1] / "fixtures" / "hlo"
PNNX_FIXTURES = sorted(p.name for p in MODELS.iterdir() if (p / "model.pnnx.param").exists())
HLO_TEXTS = [f"{path.name[: -len('.npz')]}{suffix}" for path in sorted(HLO.glob("*.npz"))
             for suffix in (".hlo.txt", ".opt.hlo.txt")]
# XLA's float_math converts to f16, a dtype the standard (and so array-api-strict) does not have.
NEEDS_FLOAT16 = {"float_math.hlo.txt", "float_math.opt.hlo.txt"}
STRICT = StrictBackend.name


@pytest.fixture(scope="module", autouse=True)
def strict_backend():
    """The backend registered as a third-party plugin registers it: through ``kuiper_add_backends``."""
    plugins.plugin_manager().register(StrictPlugin(), name="strict_backend_test")
    plugins.reset_registries()
    yield
    plugins.plugin_manager().unregister(name="strict_backend_test")
    plugins.reset_registries()


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name", PNNX_FIXTURES)
def test_pnnx_fixture_matches_pytorch_on_the_strict_namespace(name, fuse):
    model = kuiper.load(MODELS / name / "model.pnnx.param", backend=STRICT, fuse=fuse)
    exact = float64_outputs(name)
    for batch, data in reference_batches(name).items():
        outputs = model(*data["inputs"])
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        assert len(outputs) == len(data["outputs"])
        for index, (got, want) in enumerate(zip(outputs, data["outputs"])):
            assert isinstance(got, ARRAY), f"{name} output {index} is a {type(got).__name__}, not the backend's array"
            exact_output = exact[batch][index] if batch in exact else None
            assert_close_to_pytorch(got, want, f"{name} {batch} output {index}", exact_output)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("text", HLO_TEXTS)
def test_hlo_fixture_matches_jax_on_the_strict_namespace(text, fuse):
    data = np.load(HLO / f"{text.split('.')[0]}.npz")
    inputs = [data[f"input{i}"] for i in range(sum(key.startswith("input") for key in data.files))]
    expected = [data[f"output{i}"] for i in range(sum(key.startswith("output") for key in data.files))]
    if text in NEEDS_FLOAT16:
        with pytest.raises(UnsupportedOperatorError, match="float16"):
            kuiper.load(HLO / text, backend=STRICT, fuse=fuse)(*inputs)
        return
    model = kuiper.load(HLO / text, backend=STRICT, fuse=fuse)
    outputs = model(*inputs)
    outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
    assert len(outputs) == len(expected)
    for index, (got, want) in enumerate(zip(outputs, expected)):
        assert isinstance(got, ARRAY), f"output {index} is a {type(got).__name__}, not the backend's array"
        got = kuiper.to_numpy(got)
        assert (got.shape, got.dtype) == (want.shape, want.dtype), f"output {index}"
        if want.dtype.kind in "fc":  # the tolerance of tests/hlo/test_hlo_fixtures.py on NumPy
            np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-3, equal_nan=True, err_msg=f"output {index}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {index}")


def test_every_fixture_is_checked():
    assert len(PNNX_FIXTURES) >= 145 and len(HLO_TEXTS) >= 34
