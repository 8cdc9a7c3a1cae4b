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
from kuiper.graph import build  # noqa: E402
from kuiper.model_ir import OpNode  # noqa: E402

from conftest import MODELS, assert_close_to_pytorch, float64_outputs, reference_batches  # noqa: E402
from single_op import graph  # noqa: E402
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


# The canonical ops the ONNX frontend added, each on the strict namespace against the NumPy backend (whose
# results their own tests check against references): indexing, dtypes and fills that only NumPy allows fail here.
OPS_FOR_ONNX = [
    ("Unique", [np.array([[1, 0], [1, 0], [2, 3]], np.int64)], {"dim": 0, "sorted": False}, 4),
    ("Unique", [np.float32([np.nan, 0.0, -0.0, 1.0, np.nan])], {"sorted": True}, 4),
    ("NonMaxSuppression", [np.float32([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6]]]),
                           np.float32([[[0.9, 0.95, 0.5]]]), np.int64(3), np.float32(0.5), np.float32(0.0)], {}, 1),
    ("Determinant", [np.float32([[[1, 2], [3, 4]], [[2, 0], [0, 3]]])], {}, 1),
    ("Extremum", [np.zeros((2, 0, 3), np.float32)], {"dim": [1], "keepdim": False, "reduction": "max"}, 1),
    ("LogSumExp", [np.zeros((2, 0, 3), np.float32)], {"dim": [1], "keepdim": True}, 1),
]


@pytest.mark.parametrize("op_type, arrays, params, outputs", OPS_FOR_ONNX,
                         ids=lambda v: v if isinstance(v, str) else "")
def test_ops_added_for_onnx_follow_the_standard(op_type, arrays, params, outputs):
    names = [f"in{i}" for i in range(len(arrays))]
    results = [f"out{i}" for i in range(outputs)]
    ir = graph([OpNode(op_type, "op", names, results, params)], names, results)
    got, want = (build(ir, backend=backend)(*arrays, to_numpy=True) for backend in (STRICT, "numpy"))
    got, want = (list(r) if outputs > 1 else [r] for r in (got, want))
    for index, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=f"output {index}")
