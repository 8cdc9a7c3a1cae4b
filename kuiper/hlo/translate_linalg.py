"""HLO cholesky, triangular-solve, fft, ragged-dot and the batch-norm family -> Cholesky,
TriangularSolve, FourierTransform, RaggedDot, BatchNormInference/Training/Grad."""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site
from .translate_called import flag
from .translate_common import attribute, integer, ints, word

TRANSPOSE_A = {"NO_TRANSPOSE": "none", "TRANSPOSE": "transpose", "ADJOINT": "adjoint"}
FFT_KINDS = {"FFT": "fft", "IFFT": "ifft", "RFFT": "rfft", "IRFFT": "irfft"}


def translate_cholesky(site: Site) -> list[OpNode]:
    return [site.op("Cholesky", site.inputs, site.outputs, {"lower": flag(site, "lower")})]


def translate_triangular_solve(site: Site) -> list[OpNode]:
    transpose = word(site, "transpose_a", "NO_TRANSPOSE")
    if transpose not in TRANSPOSE_A:
        raise site.error(f"transpose_a={transpose} must be one of {', '.join(TRANSPOSE_A)}")
    params = {"left_side": flag(site, "left_side"), "lower": flag(site, "lower"),
              "unit_diagonal": flag(site, "unit_diagonal"), "transpose_a": TRANSPOSE_A[transpose]}
    return [site.op("TriangularSolve", site.inputs, site.outputs, params)]


def translate_fft(site: Site) -> list[OpNode]:
    kind = word(site, "fft_type", "FFT")
    if kind not in FFT_KINDS:
        raise site.error(f"fft_type={kind} must be one of {', '.join(FFT_KINDS)}")
    params = {"kind": FFT_KINDS[kind], "lengths": list(ints(site, "fft_length"))}
    return [site.op("FourierTransform", site.inputs, site.outputs, params)]


RAGGED_ROWS = {"lhs_contracting_dims": [1], "rhs_contracting_dims": [1], "lhs_ragged_dims": [0],
               "rhs_group_dims": [0]}


def translate_ragged_dot(site: Site) -> list[OpNode]:
    """The form with ragged lhs rows, lhs (m, k) and rhs (g, k, n); other forms are refused."""
    found = {key: list(ints(site, key, ())) for key in RAGGED_ROWS}
    batched = ints(site, "lhs_batch_dims", ()) or ints(site, "rhs_batch_dims", ())
    if found != RAGGED_ROWS or batched or site.operand_shape(0).rank != 2:
        raise site.error(f"kuiper runs ragged-dot with lhs (m, k) ragged in m and rhs (g, k, n) ({RAGGED_ROWS}); "
                         f"found {found} and batch dims {list(batched)}")
    return [site.op("RaggedDot", site.inputs, site.outputs)]


def _batch_norm(op_type: str):
    def translate(site: Site) -> list[OpNode]:
        epsilon = attribute(site, "epsilon")
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
            raise site.error(f"attribute 'epsilon' must be a number, found {epsilon!r}")
        params = {"feature": integer(site, "feature_index"), "epsilon": float(epsilon)}
        return [site.op(op_type, site.inputs, site.outputs, params)]

    return translate


TRANSLATORS = {
    "cholesky": translate_cholesky,
    "triangular-solve": translate_triangular_solve,
    "fft": translate_fft,
    "ragged-dot": translate_ragged_dot,
    "batch-norm-inference": _batch_norm("BatchNormInference"),
    "batch-norm-training": _batch_norm("BatchNormTraining"),
    "batch-norm-grad": _batch_norm("BatchNormGrad"),
}
