"""Fixture model families; each module exposes ``MODELS = {name: ModelSpec}``."""

from . import (
    attention_rnn,
    expressions,
    families_classifiers,
    families_dense,
    ops_act_linalg_reduce,
    ops_conv_pool_norm,
    ops_rest,
    ops_shape,
    resnet,
    small,
)

FAMILIES = (
    small, resnet, families_classifiers, families_dense, ops_act_linalg_reduce, ops_conv_pool_norm, ops_shape,
    expressions, attention_rnn, ops_rest,
)


def all_models() -> dict:
    """Every spec by name; names must be unique across families."""
    models = {}
    for family in FAMILIES:
        clash = models.keys() & family.MODELS.keys()
        if clash:
            raise ValueError(f"fixture names defined twice: {sorted(clash)}")
        models.update(family.MODELS)
    return models
