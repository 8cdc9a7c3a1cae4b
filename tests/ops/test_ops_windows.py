"""nn.Fold and nn.Unfold beyond their PyTorch fixtures: fold is unfold's adjoint.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach against
hand-counted windows.
"""

import numpy as np
from conftest import op_model


def test_fold_of_unfold_counts_each_pixel_once_per_window(tmp_path):
    # fold is unfold's adjoint: fold(unfold(ones)) is how many windows cover each pixel.
    unfold = op_model(tmp_path, "nn.Unfold u 1 1 x y dilation=(1,1) kernel_size=(2,2) padding=(0,0) stride=(1,1)")
    fold = op_model(tmp_path, "nn.Fold f 1 1 x y dilation=(1,1) kernel_size=(2,2) output_size=(3,3) padding=(0,0) "
                              "stride=(1,1)")
    covered = np.asarray(fold(unfold(np.ones((1, 1, 3, 3), np.float32))))
    np.testing.assert_array_equal(covered[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])
