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


RAGGED_FORMS = {  # the dimension numbers of each form kuiper runs -> RaggedDot's ``ragged``
    "rows": {"lhs_contracting_dims": [1], "rhs_contracting_dims": [1], "lhs_ragged_dims": [0],
             "rhs_group_dims": [0]},
    "contracting": {"lhs_contracting_dims": [1], "rhs_contracting_dims": [0], "lhs_ragged_dims": [1],
                    "rhs_group_dims": []},
}


def translate_ragged_dot(site: Site) -> list[OpNode]:
    """Ragged lhs rows (lhs (m, k), rhs (g, k, n)) or a ragged contracting dim (lhs (m, k), rhs (k, n))."""
    found = {key: list(ints(site, key, ())) for key in RAGGED_FORMS["rows"]}
    batched = ints(site, "lhs_batch_dims", ()) or ints(site, "rhs_batch_dims", ())
    form = next((name for name, dims in RAGGED_FORMS.items() if dims == found), None)
    if form is None or batched or site.operand_shape(0).rank != 2:
        raise site.error(f"kuiper runs ragged-dot in the forms {RAGGED_FORMS} (no batch dims); found {found} and "
                         f"batch dims {list(batched)}")
    return [site.op("RaggedDot", site.inputs, site.outputs, {"ragged": form})]


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
