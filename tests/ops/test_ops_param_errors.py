"""Unsupported params of the issue-18 ops fail at load time, naming the op and the param.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) only hold
params PyTorch accepts; these one-op models hold the ones kuiper must refuse.
"""

import pytest
from conftest import op_model

from kuiper.errors import KuiperError


@pytest.mark.parametrize(
    "line, inputs, message",
    [
        ("F.grid_sample g 2 1 x z y align_corners=False mode=area padding_mode=zeros $input=x $grid=z", ("x", "z"),
         r"mode='area' is not supported \(supported: 'bilinear', 'nearest', 'bicubic'\)"),
        ("torch.fft.fft f 1 1 x y dim=-1 n=None norm=unitary $input=x", ("x",),
         r"norm='unitary' is not supported"),
        ("torch.fft.fft2 f 1 1 x y dim=(-2,-1) norm=None s=(4,4,4) $input=x", ("x",),
         r"'s' \[4, 4, 4\] and 'dim' \[-2, -1\] differ in length"),
        ("torch.istft i 1 1 x y center=True n_fft=8 onesided=True return_complex=True $input=x", ("x",),
         r"return_complex=True needs a two-sided spectrum"),
        ("nn.RReLU r 1 1 x y lower=0.5 upper=0.1", ("x",), r"'lower' \(0.5\) must not exceed 'upper'"),
        ("F.unfold u 1 1 x y dilation=(1,1) kernel_size=(0,2) padding=(0,0) stride=(1,1) $input=x", ("x",),
         r"must be positive"),
    ],
)
def test_unsupported_params_fail_at_load_time_naming_op_and_param(tmp_path, line, inputs, message):
    with pytest.raises(KuiperError, match=message) as info:
        op_model(tmp_path, line, inputs=inputs)
    assert f"op '{line.split()[1]}'" in str(info.value)
