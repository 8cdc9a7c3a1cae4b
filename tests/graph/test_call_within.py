"""How loops, branches and scans run their sub-graphs (``Model.call_within``)."""

from __future__ import annotations

import numpy as np
import pytest

import kuiper


def test_a_sub_graph_call_takes_arrays_of_its_dtype_as_they_are_and_checks_the_rest():
    """Model.call_within, how loops and branches run their sub-graphs: feeds that are arrays of the declared
    dtype go in unchecked (the outer call checked the model's inputs); anything else takes the full check."""
    from kuiper.errors import InputError

    text = "HloModule m\nENTRY main {\n  x = f32[3] parameter(0)\n  ROOT y = f32[3] abs(x)\n}\n"
    model = kuiper.load_hlo(text)
    x = np.float32([-1, 2, -3])
    (y,) = model.call_within([x])
    np.testing.assert_array_equal(y, [1, 2, 3])
    (y,) = model.call_within([np.float64([-1, 2, -3])])  # another float dtype: converted, as a call would
    assert y.dtype == np.float32
    with pytest.raises(InputError, match="must be an array"):
        model.call_within(["not an array"])
