"""The exported fixtures exercise every expression function PNNX writes, against PyTorch.

tests/end_to_end/test_models.py checks each fixture's outputs; this test checks that, taken
together, the fixtures' pnnx.Expression ops call every function in the table
that pnnx can write from a traced model.
"""

from kuiper.pnnx_expr import FUNCTIONS, parse
from kuiper.pnnx_expr.nodes import Call
from kuiper.pnnx_expr.transform import _walk
from kuiper.formats.pnnx_param import parse_param

from conftest import MODELS

# pnnx 20261020 traces models: int() of sizes is folded to constants and dtype
# casts become Tensor.to ops, so these never appear in a real export.  They are
# covered by the expression unit tests with hand-written strings.  torch.tanh is
# turned into an F.tanh op before pnnx folds arithmetic, so `tanh` stays outside too.
NOT_PRODUCED_BY_TRACING = {"int", "torch.bool", "torch.float", "torch.long", "tanh"}


def _functions_in_fixtures() -> set[str]:
    used = set()
    for param in MODELS.glob("*/model.pnnx.param"):
        for op in parse_param(param.read_text(), str(param)).ops:
            if op.type == "pnnx.Expression":
                expr = parse(op.params["expr"], num_inputs=len(op.inputs))
                used.update(node.name for node in _walk(expr) if isinstance(node, Call))
    return used


def test_every_pnnx_function_appears_in_an_exported_fixture():
    written_by_pnnx = {name for name, info in FUNCTIONS.items() if info.source == "pnnx"}
    missing = written_by_pnnx - NOT_PRODUCED_BY_TRACING - _functions_in_fixtures()
    assert not missing, f"no exported fixture uses: {sorted(missing)}"


def test_the_log1p_expm1_parenthesis_quirk_is_in_a_real_export():
    text = (MODELS / "expr_unary_float" / "model.pnnx.param").read_text()
    assert "expm1),@1)" in text and "log1p,@0" in text  # pnnx's misplaced parentheses, as written
