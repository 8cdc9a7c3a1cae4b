"""Elementwise fusion (filled in by the expression-engine work): currently a pass-through."""

from __future__ import annotations


def fuse_elementwise(order, ir):
    return order, []
