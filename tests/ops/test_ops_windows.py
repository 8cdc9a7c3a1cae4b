"""nn.Fold and nn.Unfold beyond their PyTorch fixtures: fold is unfold's adjoint.

The fixtures (tools/fixture_models/ops_rest.py, checked by tests/end_to_end/test_models.py) compare each
op with PyTorch; these tests pin the cases a fixture cannot reach against
hand-counted windows.
"""

import numpy as np
from conftest import op_model
from single_op import run_op


def test_fold_of_unfold_counts_each_pixel_once_per_window(tmp_path):
    # fold is unfold's adjoint: fold(unfold(ones)) is how many windows cover each pixel.
    unfold = op_model(tmp_path, "nn.Unfold u 1 1 x y dilation=(1,1) kernel_size=(2,2) padding=(0,0) stride=(1,1)")
    fold = op_model(tmp_path, "nn.Fold f 1 1 x y dilation=(1,1) kernel_size=(2,2) output_size=(3,3) padding=(0,0) "
                              "stride=(1,1)")
    covered = np.asarray(fold(unfold(np.ones((1, 1, 3, 3), np.float32))))
    np.testing.assert_array_equal(covered[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


def test_fold_in_three_dims_counts_windows_per_voxel():
    # kernel (1, 2, 2) over a (2, 3, 3) image: voxel (d, h, w) lies under (1 + (0 < h < 2)) * (1 + (0 < w < 2))
    # windows; columns of ones fold into those counts.
    columns = np.ones((1, 4, 2 * 2 * 2), dtype=np.float64)
    got = run_op("Fold", [columns], {"spatial_dims": 3, "output_size": [2, 3, 3], "kernel_size": [1, 2, 2]})
    per_plane = np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]])
    np.testing.assert_array_equal(got, np.broadcast_to(per_plane, (1, 1, 2, 3, 3)))


def test_fold_with_uneven_pads_crops_the_padding():
    # 1-D, kernel 2, pads [1, 0] on 3 samples: windows start at -1, 0, 1 (3 windows); sample i sums the
    # columns of the windows covering it: 0 <- w0 tap 1 and w1 tap 0; 1 <- w1 tap 1, w2 tap 0; 2 <- w2 tap 1.
    columns = np.array([[[10, 20, 30], [1, 2, 3]]], dtype=np.float64)  # rows: tap 0, tap 1
    got = run_op("Fold", [columns], {"spatial_dims": 1, "output_size": [3], "kernel_size": [2], "pads": [[1, 0]]})
    np.testing.assert_array_equal(got, [[[1 + 20, 2 + 30, 3]]])
