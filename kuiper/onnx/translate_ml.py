"""ONNX's ai.onnx.ml ops with tensor semantics -> canonical ops: Binarizer (a comparison), ArrayFeatureExtractor
(IndexSelect along the last dim), TreeEnsemble (every tree walked at once, one level per step).

The ai.onnx.ml ops on strings, maps and sequences (LabelEncoder on strings, DictVectorizer, ZipMap ...) stay
refused: kuiper's values are numeric tensors.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import Emit
from .site import Site

ML = "ai.onnx.ml"


def translate_binarizer(site: Site) -> list[OpNode]:
    """1 where x > threshold, else 0, in x's type."""
    emit = Emit(site)
    x, dtype = site.input(0), site.dtype(0)
    above = emit.compare("gt", x, emit.const(site.float_("threshold", 0.0), dtype))
    emit.convert(above, dtype, out=site.outputs[0])
    return emit.ops


def translate_array_feature_extractor(site: Site) -> list[OpNode]:
    """X[..., indices] with the indices flattened: (..., k); a 1-D X gives one row (1, k), as ONNX Runtime does."""
    shape = site.shape(0)
    if shape is None or not shape:
        raise site.error(f"X must have at least one dim, found {shape}")
    emit = Emit(site)
    dtype = site.dtype(0)
    indices = emit.op("Reshape", [emit.convert(site.input(1), "int64")], {"shape": [-1]}, dtype="int64")
    if len(shape) > 1:
        emit.op("IndexSelect", [site.input(0), indices], {"dim": len(shape) - 1}, dtype=dtype, out=site.outputs[0])
        return emit.ops
    picked = emit.op("IndexSelect", [site.input(0), indices], {"dim": 0}, dtype=dtype)
    emit.op("Reshape", [picked], {"shape": [1, -1]}, dtype=dtype, out=site.outputs[0])
    return emit.ops


# nodes_modes: BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ, BRANCH_MEMBER
_COMPARISONS = {0: "le", 1: "lt", 2: "ge", 3: "gt", 4: "eq", 5: "ne"}
_MEMBER = 6
_AGGREGATES = {0: "average", 1: "sum", 2: "min", 3: "max"}


class _Trees:
    """The ensemble as tables over slots: the interior nodes, then the leaves. A slot's true and false
    successors are slots; a leaf is its own successor, so walking past it stays there."""

    def __init__(self, site: Site):
        modes = site.tensor("nodes_modes").astype(np.int64).reshape(-1)
        count = len(modes)
        self.features = np.asarray(site.ints("nodes_featureids"), np.int64)
        self.splits = site.tensor("nodes_splits").reshape(-1)
        true_ids, false_ids = site.ints("nodes_truenodeids"), site.ints("nodes_falsenodeids")
        true_leaf, false_leaf = site.ints("nodes_trueleafs"), site.ints("nodes_falseleafs")
        tracks = site.ints("nodes_missing_value_tracks_true", [0] * count)
        self.weights = site.tensor("leaf_weights").reshape(-1)
        self.targets = np.asarray(site.ints("leaf_targetids"), np.int64)
        roots = site.ints("tree_roots")
        lengths = {len(a) for a in (self.features, self.splits, true_ids, false_ids, true_leaf, false_leaf, tracks)}
        if lengths != {count} or len(self.weights) != len(self.targets) or not roots:
            raise site.error("the nodes_* attributes must have one length, the leaf_* attributes another, and "
                             "tree_roots must name at least one root")
        leaves = len(self.weights)

        def slot(index: int, is_leaf: int) -> int:
            if not 0 <= index < (leaves if is_leaf else count):
                raise site.error(f"a node refers to {'leaf' if is_leaf else 'node'} {index}, which does not exist")
            return count + index if is_leaf else index

        self.count = count
        self.modes = np.concatenate([modes, np.zeros(leaves, np.int64)])
        self.features = np.concatenate([self.features, np.zeros(leaves, np.int64)])
        self.splits = np.concatenate([self.splits, np.zeros(leaves, self.splits.dtype)])
        self.tracks = np.asarray(tracks + [0] * leaves, bool)
        self.true_next = np.asarray([slot(i, leaf) for i, leaf in zip(true_ids, true_leaf)]
                                    + list(range(count, count + leaves)), np.int64)
        self.false_next = np.asarray([slot(i, leaf) for i, leaf in zip(false_ids, false_leaf)]
                                     + list(range(count, count + leaves)), np.int64)
        # A root whose two branches are the same leaf is that leaf (a tree of one leaf).
        self.roots = np.asarray([slot(true_ids[r], 1) if true_leaf[r] and false_leaf[r] and true_ids[r] == false_ids[r]
                                 else slot(r, 0) for r in roots], np.int64)
        self.members = self._members(site, modes)
        self.depth = self._depth(site)

    def _members(self, site: Site, modes: np.ndarray) -> np.ndarray | None:
        """(slots, most members) of each BRANCH_MEMBER node's set, NaN-padded, in the order of nodes_modes."""
        member_nodes = [i for i, mode in enumerate(modes) if mode == _MEMBER]
        if not member_nodes:
            return None
        values = site.tensor("membership_values").reshape(-1).astype(np.float64)
        cuts = np.flatnonzero(np.isnan(values))
        if len(cuts) != len(member_nodes):
            raise site.error(f"membership_values holds {len(cuts)} NaN-delimited sets for {len(member_nodes)} "
                             "BRANCH_MEMBER nodes")
        sets = np.split(values, cuts + 1)[:len(member_nodes)]
        sets = [group[~np.isnan(group)] for group in sets]
        table = np.full((len(self.modes), max(1, max(len(group) for group in sets))), np.nan)
        for node, group in zip(member_nodes, sets):
            table[node, :len(group)] = group
        return table

    def _depth(self, site: Site) -> int:
        """Interior nodes on the longest path from a root, which is how many steps reach every leaf."""
        depth, frontier = 0, set(int(r) for r in self.roots if r < self.count)
        while frontier:
            depth += 1
            if depth > self.count:
                raise site.error("the trees' nodes form a cycle")
            frontier = {int(n) for s in frontier for n in (self.true_next[s], self.false_next[s]) if n < self.count}
        return depth


def _lookup(emit: Emit, table: np.ndarray, slots: str, shape: list[int]) -> str:
    """table[slots] for a 1-D constant table and slots of ``shape``."""
    dtype = str(table.dtype)
    flat = emit.op("Reshape", [slots], {"shape": [-1]}, dtype="int64")
    picked = emit.op("IndexSelect", [emit.const(table, dtype), flat], {"dim": 0}, dtype=dtype)
    return emit.op("Reshape", [picked], {"shape": shape}, dtype=dtype)


def translate_tree_ensemble(site: Site) -> list[OpNode]:
    """Each sample walks every tree at once: its slots (N, trees) start at the roots; a step reads each
    slot's feature, compares it by the slot's mode (a NaN goes to the true side where
    nodes_missing_value_tracks_true says so) and moves to the true or false successor. After as many steps
    as the deepest tree, every slot is a leaf; its weight goes to its target, combined by aggregate_function."""
    shape = site.static_shape(0)
    if len(shape) != 2:
        raise site.error(f"X must be [N, F], found {list(shape)}")
    if site.int_("post_transform", 0) != 0:
        raise site.error(f"post_transform={site.int_('post_transform')} is not supported (only 0, none)")
    aggregate = _AGGREGATES.get(site.int_("aggregate_function", 1))
    if aggregate is None:
        raise site.error(f"aggregate_function must be 0-3, found {site.int_('aggregate_function')}")
    trees = _Trees(site)
    batch, targets = shape[0], site.int_("n_targets")
    count = len(trees.roots)
    dtype = site.dtype(0)
    if trees.features.max(initial=0) >= shape[1] or trees.targets.min(initial=0) < 0 \
            or trees.targets.max(initial=0) >= targets:
        raise site.error(f"a node reads a feature beyond X's {shape[1]}, or a leaf a target beyond n_targets={targets}")
    emit = Emit(site)
    x = site.input(0)
    grid = [batch, count]
    slots = emit.op("Broadcast", [emit.const(trees.roots, "int64")], {"shape": grid, "dims": [1]}, dtype="int64")
    modes = set(int(m) for m in trees.modes[:trees.count])
    for _ in range(trees.depth):
        value = emit.op("TakeAlongAxis", [x, _lookup(emit, trees.features, slots, grid)], {"dim": 1}, dtype=dtype)
        split = emit.convert(_lookup(emit, trees.splits, slots, grid), dtype)
        mode = _lookup(emit, trees.modes, slots, grid)
        go_true = emit.compare("ne", mode, mode)  # false everywhere
        for code in sorted(modes):
            if code == _MEMBER:
                members = emit.convert(_member_rows(emit, trees.members, slots, grid), dtype)
                wide = emit.op("Unsqueeze", [value], {"dim": 2}, dtype=dtype)
                hit = emit.op("Extremum", [emit.convert(emit.compare("eq", wide, members), "int8")],
                              {"dim": [2], "keepdim": False, "reduction": "max"}, dtype="int8")
                test = emit.compare("ne", hit, emit.const(0, "int8"))
            elif code in _COMPARISONS:
                test = emit.compare(_COMPARISONS[code], value, split)
            else:
                raise site.error(f"nodes_modes holds {code}, not a mode of TreeEnsemble (0-6)")
            chosen = emit.fn("and", [emit.compare("eq", mode, emit.const(code, "int64")), test])
            go_true = emit.fn("or", [go_true, chosen])
        if trees.tracks.any():
            missing = emit.fn("and", [emit.compare("ne", value, value),
                                      _lookup(emit, trees.tracks, slots, grid)])
            go_true = emit.fn("or", [go_true, missing])
        slots = emit.fn("select", [go_true, _lookup(emit, trees.true_next, slots, grid),
                                   _lookup(emit, trees.false_next, slots, grid)])
    leaves = emit.fn("subtract", [slots, emit.const(trees.count, "int64")])
    weights = emit.convert(_lookup(emit, trees.weights, leaves, grid), dtype)
    target = emit.op("Unsqueeze", [_lookup(emit, trees.targets, leaves, grid)], {"dim": 2}, dtype="int64")
    hits = emit.compare("eq", target, emit.op("Iota", [], {"shape": [1, 1, targets], "dim": 2, "dtype": "int64"},
                                              dtype="int64"))
    spread = emit.op("Unsqueeze", [weights], {"dim": 2}, dtype=dtype)
    params = {"dim": [1], "keepdim": False}
    if aggregate in ("sum", "average"):
        total = emit.op("Reduction", [emit.fn("select", [hits, spread, emit.const(0.0, dtype)])],
                        {**params, "reduction": "sum"}, dtype=dtype)
        if aggregate == "average":
            total = emit.fn("divide", [total, emit.const(float(count), dtype)])
        emit.op("Identity", [total], dtype=dtype, out=site.outputs[0])
    else:  # targets no leaf reaches keep the type's largest (min) or lowest (max) value, as ONNX's reference
        info = np.finfo(dtype)
        fill = emit.const(float(info.max if aggregate == "min" else info.min), dtype)
        emit.op("Extremum", [emit.fn("select", [hits, spread, fill])], {**params, "reduction": aggregate},
                dtype=dtype, out=site.outputs[0])
    return emit.ops


def _member_rows(emit: Emit, table: np.ndarray, slots: str, grid: list[int]) -> str:
    """The member sets (N, trees, most members) of the slots' nodes (NaN-padded rows of ``table``)."""
    flat = emit.op("Reshape", [slots], {"shape": [-1]}, dtype="int64")
    rows = emit.op("IndexSelect", [emit.const(table, "float64"), flat], {"dim": 0}, dtype="float64")
    return emit.op("Reshape", [rows], {"shape": [*grid, table.shape[1]]}, dtype="float64")


TRANSLATORS = {f"{ML}:Binarizer": translate_binarizer,
               f"{ML}:ArrayFeatureExtractor": translate_array_feature_extractor,
               f"{ML}:TreeEnsemble": translate_tree_ensemble}
