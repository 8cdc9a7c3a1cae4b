"""What is left of the HLO elementwise ops (now translated into the canonical Elementwise op): the
total-order key that ops_sort's comparators still import from here, until sort is translated too."""

from __future__ import annotations

from ..ops.elementwise_exact import total_order_key

__all__ = ["total_order_key"]
