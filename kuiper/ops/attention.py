"""Attention: F.scaled_dot_product_attention and nn.MultiheadAttention.

Both are ``softmax(q @ k^T * scale + mask) @ v`` over the last two dims (``attend``),
computed in the inputs' float dtype with one (.., L, S) score buffer that the scale,
the mask and the softmax all update in place.  A boolean mask becomes an additive
0/-inf mask of its own (small) shape first, so masking never copies the scores.

The two spell boolean masks oppositely: for scaled_dot_product_attention True means
"may attend"; for MultiheadAttention True means "masked out".

pnnx writes nn.MultiheadAttention with its inputs in two orders: query, key, value
and then the mask (its fusion passes, and a float mask that is a graph input), or the
mask first (a mask computed in the graph, e.g. ``attn_mask=m > 0``), while ``$attn_mask``
always marks the last position.  The op takes the file's order when the shapes fit
and the mask-first order otherwise (see ``MultiheadAttention.roles``).
pnnx does not record ``average_attn_weights`` (False is read when a file gives it).
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from .base import Op
from .params import Bool, Float, Int
from .special_values import is_tame

NEG_INF = -math.inf


def additive_mask(xp, mask, dtype, true_means_keep: bool):
    """A float mask to add to scores: a float mask as is, a bool mask as 0 / -inf."""
    if mask.dtype != xp.bool:
        return mask if mask.dtype == dtype else xp.astype(mask, dtype)
    blocked = mask if not true_means_keep else xp.logical_not(mask)
    out = xp.zeros(mask.shape, dtype=dtype)
    out[blocked] = NEG_INF
    return out


def causal_mask(xp, length: int, source_length: int, dtype):
    """0 on and below the diagonal, -inf above (PyTorch's is_causal: top-left aligned)."""
    rows = xp.arange(length)[:, None]
    cols = xp.arange(source_length)[None, :]
    out = xp.zeros((length, source_length), dtype=dtype)
    out[cols > rows] = NEG_INF
    return out


def attend(backend, q, k, v, scale: float, masks=(), keep_weights: bool = False):
    """softmax(q @ k^T * scale + sum(masks)) @ v; leading dims broadcast.  Returns (out, weights or None).

    Inputs holding NaN or +-inf take ``attend_exactly`` (three dot products tell them apart)."""
    xp = backend.xp
    if not (is_tame(xp, q) and is_tame(xp, k) and is_tame(xp, v)):
        return attend_exactly(backend, q, k, v, scale, masks, keep_weights)
    scores = xp.matmul(q, xp.matrix_transpose(k))  # fresh (.., L, S): everything below works in it
    scores *= scale
    for mask in masks:
        scores += mask
    weights = backend.softmax_in_place(scores, -1)
    return xp.matmul(weights, v), (weights if keep_weights else None)


def attend_exactly(backend, q, k, v, scale: float, masks=(), keep_weights: bool = False):
    """``attend`` where a masked-out (query, key) pair has no influence at all, as IEEE 754 and PyTorch give it
    when a NaN or inf is in a key or value that a query may not see (a causal model's later tokens).

    Adding -inf to a NaN score leaves NaN, and a zero weight times a NaN or inf value is NaN: the plain
    products would spread one bad token over every row.  Here masked scores are set to -inf, the
    products use v with its non-finite entries zeroed, and each output gets what those entries add
    under IEEE 754, counted by three more products: NaN where a NaN is weighted (or an inf by an
    unmasked zero weight, or infs of both signs), else the inf's sign.  Slower; for such inputs only."""
    xp = backend.xp
    scores = xp.matmul(q, xp.matrix_transpose(k))
    scores *= scale
    allowed = None
    for mask in masks:
        scores += mask
        keep = mask != NEG_INF
        allowed = keep if allowed is None else xp.logical_and(allowed, keep)
    if allowed is not None:
        scores = xp.where(allowed, scores, xp.asarray(NEG_INF, dtype=scores.dtype))
    weights = backend.softmax_in_place(scores, -1)
    finite = xp.isfinite(v)
    zero = xp.zeros((), dtype=v.dtype)
    out = xp.matmul(weights, xp.where(finite, v, zero))
    if bool(xp.all(finite)):
        return out, (weights if keep_weights else None)
    present = xp.ones(weights.shape, dtype=xp.bool) if allowed is None else xp.broadcast_to(allowed, weights.shape)

    def counts(rows, columns):  # per output, how many weighted entries are both
        return xp.matmul(xp.astype(rows, v.dtype), xp.astype(columns, v.dtype))

    positive = xp.logical_and(present, weights > 0)
    plus, minus = v == math.inf, v == -math.inf
    nans = counts(present, xp.isnan(v)) + counts(xp.logical_and(present, weights == 0), xp.logical_or(plus, minus))
    ups, downs = counts(positive, plus), counts(positive, minus)
    nan = xp.logical_or(nans > 0, xp.logical_and(ups > 0, downs > 0))
    out = xp.where(downs > 0, xp.asarray(-math.inf, dtype=out.dtype), out)
    out = xp.where(ups > 0, xp.asarray(math.inf, dtype=out.dtype), out)
    out = xp.where(nan, xp.asarray(math.nan, dtype=out.dtype), out)
    return out, (weights if keep_weights else None)


def _shape(value) -> tuple:
    return tuple(getattr(value, "shape", ()))


class AttentionOp(Op):
    """An op computing ``attend``; a backend's kernel may compute it another way (``attention``)."""

    def attention(self, q, k, v, scale: float, masks=(), keep_weights: bool = False):
        return attend(self.backend, q, k, v, scale, masks, keep_weights)


class ScaledDotProductAttention(AttentionOp):
    """F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa).

    query (..., Hq, L, E), key (..., H, S, E), value (..., H, S, Ev); any leading dims.
    dropout_p is ignored (inference).  enable_gqa lets Hq be a multiple of H.
    """

    types = ("ScaledDotProductAttention",)
    fresh_output = True
    params = (Bool("is_causal", default=False), Float("scale", default=None), Bool("enable_gqa", default=False))

    def setup(self):
        self.require_inputs(3, 4)
        self.positions = [self.input_index(key, default=i) for i, key in enumerate(("query", "key", "value"))]
        self.mask_at = self.input_index("attn_mask", default=3 if len(self.node.inputs) == 4 else None)
        if self.mask_at is None and len(self.node.inputs) == 4:
            raise self.error("has a fourth input that is not bound to '$attn_mask'")
        if self.is_causal and self.mask_at is not None:
            raise self.unsupported("is_causal", True, "False when an attn_mask is given (as in PyTorch)")

    def forward(self, *inputs):
        xp = self.xp
        q, k, v = (inputs[i] for i in self.positions)
        for name, value in (("query", q), ("key", k), ("value", v)):
            if getattr(value, "ndim", 0) < 2:
                raise ShapeError(f"{self.node.describe()}: {name} needs at least 2 dims, found {_shape(value)}")
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ShapeError(f"{self.node.describe()}: query {_shape(q)}, key {_shape(k)} and value {_shape(v)} "
                             "do not fit (query and key share the last dim, key and value the sequence dim)")
        if self.enable_gqa and q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
            groups, remainder = divmod(q.shape[-3], k.shape[-3])
            if remainder:
                raise ShapeError(f"{self.node.describe()}: enable_gqa needs the query heads ({q.shape[-3]}) to be a "
                                 f"multiple of the key/value heads ({k.shape[-3]})")
            k = xp.repeat(k, groups, axis=-3)
            v = xp.repeat(v, groups, axis=-3)
        scale = 1.0 / math.sqrt(q.shape[-1]) if self.scale is None else self.scale
        masks = []
        if self.is_causal:
            masks.append(causal_mask(xp, q.shape[-2], k.shape[-2], q.dtype))
        blocked_rows = None
        if self.mask_at is not None and inputs[self.mask_at] is not None:
            mask = additive_mask(xp, inputs[self.mask_at], q.dtype, true_means_keep=True)
            # PyTorch gives 0 for a query that may attend to nothing.  Such rows (found on the
            # small mask) are unmasked for the softmax, which then stays finite, and zeroed after.
            blocked_rows = xp.all(mask == NEG_INF, axis=-1, keepdims=True)
            if bool(xp.any(blocked_rows)):
                mask = xp.where(blocked_rows, xp.zeros((), dtype=mask.dtype), mask)
            else:
                blocked_rows = None
            masks.append(mask)
        out, _ = self.attention(q, k, v, scale, masks)
        if blocked_rows is not None:
            out = xp.where(blocked_rows, xp.zeros((), dtype=out.dtype), out)
        return out


class MultiheadAttention(AttentionOp):
    """nn.MultiheadAttention: input projections, ``attend`` per head, output projection.

    Inputs: query[, key[, value]] (one input: self-attention; two: key == value) and the
    masks ``$attn_mask`` ((L, S) or (N * heads, L, S)) and ``$key_padding_mask`` ((N, S)).
    Outputs: the attention output, and the attention weights when the op has two outputs
    ((N, L, S) averaged over heads, or (N, heads, L, S) with average_attn_weights=False).
    """

    types = ("MultiheadAttention",)
    fresh_output = True
    MASK_KEYS = ("attn_mask", "key_padding_mask")
    TENSOR_KEYS = (None, "input", "query", "key", "value")  # pnnx's fusion passes bind the query to $input
    params = (
        Int("embed_dim", low=1), Int("num_heads", low=1), Bool("batch_first", default=False),
        Bool("add_zero_attn", default=False), Bool("average_attn_weights", default=True, attr="average_weights"),
    )

    def setup(self):
        if self.embed_dim % self.num_heads:
            raise self.error(f"embed_dim={self.embed_dim} must be a positive multiple of num_heads={self.num_heads}")
        self.head_dim = self.embed_dim // self.num_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)  # of each head's scores
        self.kdim = self.int_param("kdim", default=self.embed_dim)
        self.vdim = self.int_param("vdim", default=self.embed_dim)
        if len(self.node.outputs) not in (1, 2):
            raise self.error(f"has {len(self.node.outputs)} outputs; expected the output and optionally the weights")
        self.need_weights = len(self.node.outputs) == 2
        self._read_inputs()
        self._read_weights()

    def _read_inputs(self):
        keys = self.node.input_keys
        self.mask_keys = [key for key in keys if key in self.MASK_KEYS]
        unknown = [key for key in keys if key not in self.MASK_KEYS + self.TENSOR_KEYS]
        if unknown:
            expected = ", ".join("$" + k for k in self.TENSOR_KEYS[1:] + self.MASK_KEYS)
            raise self.error(f"unknown input keyword(s) {unknown}; expected {expected}")
        self.tensor_count = len(keys) - len(self.mask_keys)
        if not 1 <= self.tensor_count <= 3:
            raise self.error(f"expects query[, key[, value]] and masks, the file gives {len(keys)} input(s)")
        if self.tensor_count == 1 and (self.kdim, self.vdim) != (self.embed_dim,) * 2:
            raise self.error("self-attention (one input) needs kdim == vdim == embed_dim")

    def _read_weights(self):
        e = self.embed_dim
        attrs = self.node.attrs
        bias = self.bool_param("bias", default="in_proj_bias" in attrs)
        if "in_proj_weight" in attrs:
            weight = attrs["in_proj_weight"]
            if tuple(weight.shape) != (3 * e, e) or self.kdim != e or self.vdim != e:
                raise self.error(f"in_proj_weight must be ({3 * e}, {e}) with kdim == vdim == embed_dim, "
                                 f"found {tuple(weight.shape)}")
            # Transposed once: x @ W^T; one (E, 3E) product when query, key and value are one tensor.
            self.in_proj_t = self.xp.permute_dims(self.weight("in_proj_weight", aligned=True), (1, 0))
            projections = [self.in_proj_t[:, i * e:(i + 1) * e] for i in range(3)]
            self.packed_projection = True
        else:
            projections = []
            for key, width in (("q_proj_weight", e), ("k_proj_weight", self.kdim), ("v_proj_weight", self.vdim)):
                weight = attrs.get(key)
                if weight is None or tuple(weight.shape) != (e, width):
                    found = None if weight is None else tuple(weight.shape)
                    raise self.error(f"needs '@in_proj_weight' or '@{key}' of shape ({e}, {width}), found {found}")
                projections.append(self.xp.permute_dims(self.weight(key, aligned=True), (1, 0)))
            self.in_proj_t, self.packed_projection = None, False
        self.q_proj_t, self.k_proj_t, self.v_proj_t = projections
        self.in_bias = None
        if bias:
            in_bias = self.weight("in_proj_bias")
            if tuple(in_bias.shape) != (3 * e,):
                raise self.error(f"in_proj_bias must have shape ({3 * e},), found {tuple(in_bias.shape)}")
            self.in_bias = in_bias
        out_weight = attrs.get("out_proj.weight")
        if out_weight is None or tuple(out_weight.shape) != (e, e):
            raise self.error(f"needs '@out_proj.weight' of shape ({e}, {e})")
        self.out_proj_t = self.xp.permute_dims(self.weight("out_proj.weight", aligned=True), (1, 0))
        self.out_bias = self.weight("out_proj.bias", required=bias)
        self.bias_k = self.bias_v = None
        if self.bool_param("add_bias_kv", default="bias_k" in attrs):
            self.bias_k, self.bias_v = (self.xp.reshape(self.weight(key), (1, 1, e)) for key in ("bias_k", "bias_v"))

    # -- which input is which ----------------------------------------------------------
    def roles(self, inputs) -> tuple[list, dict]:
        """([query, key, value], {mask key: mask}) in the file's order, else in pnnx's mask-first order."""
        count, masks = self.tensor_count, len(self.mask_keys)
        if not masks and self._fits(inputs):
            return self._spread(inputs), {}  # no masks: one order
        in_order = (list(inputs[:count]), dict(zip(self.mask_keys, inputs[count:])))
        mask_first = (list(inputs[masks:]), dict(zip(self.mask_keys, inputs[:masks])))
        for tensors, mask_values in (in_order, mask_first):
            if self._fits(tensors):
                return self._spread(tensors), mask_values
        shapes = ", ".join(str(_shape(value)) for value in inputs)
        raise ShapeError(f"{self.node.describe()}: inputs {shapes} do not fit query (.., {self.embed_dim}), "
                         f"key (.., {self.kdim}) and value (.., {self.vdim}) with batch_first={self.batch_first}")

    @staticmethod
    def _spread(tensors):
        """query alone (self-attention), query and one tensor for key and value, or all three."""
        if len(tensors) == 1:
            return [tensors[0]] * 3
        return [tensors[0], tensors[1], tensors[1]] if len(tensors) == 2 else list(tensors)

    def _fits(self, tensors) -> bool:
        q, k, v = self._spread(tensors)
        for value, width in ((q, self.embed_dim), (k, self.kdim), (v, self.vdim)):
            if getattr(value, "ndim", 0) not in (2, 3) or value.shape[-1] != width or value.dtype == self.xp.bool:
                return False
        return q.ndim == k.ndim == v.ndim

    # -- the computation ---------------------------------------------------------------------
    def forward(self, *inputs):
        xp = self.xp
        (query, key, value), masks = self.roles(inputs)
        self_attention = query is key is value
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query[None], key[None], value[None]
        elif not self.batch_first:
            query, key, value = (xp.permute_dims(t, (1, 0, 2)) for t in (query, key, value))
        batch, length = query.shape[0], query.shape[1]
        if key.shape[:2] != value.shape[:2] or key.shape[0] != batch:
            raise ShapeError(f"{self.node.describe()}: query {_shape(query)}, key {_shape(key)} and value "
                             f"{_shape(value)} (batch first) need the same batch, and key and value the same length")
        q, k, v = self._project(query, key, value, self_attention)
        attn_mask, padding_mask = masks.get("attn_mask"), masks.get("key_padding_mask")
        if self.bias_k is not None:
            k = xp.concat([k, xp.broadcast_to(self.bias_k, (batch, 1, self.embed_dim))], axis=1)
            v = xp.concat([v, xp.broadcast_to(self.bias_v, (batch, 1, self.embed_dim))], axis=1)
            attn_mask, padding_mask = self._pad_masks(attn_mask, padding_mask)
        if self.add_zero_attn:
            k = xp.concat([k, xp.zeros((batch, 1, self.embed_dim), dtype=k.dtype)], axis=1)
            v = xp.concat([v, xp.zeros((batch, 1, self.embed_dim), dtype=v.dtype)], axis=1)
            attn_mask, padding_mask = self._pad_masks(attn_mask, padding_mask)
        additive = self._masks(attn_mask, padding_mask, batch, length, k.shape[1], q.dtype)
        out, weights = self.multi_head(q, k, v, additive)
        out = self.project("out", out)
        if unbatched:
            out = out[0]
        elif not self.batch_first:
            out = xp.permute_dims(out, (1, 0, 2))
        if not self.need_weights:
            return out
        if self.average_weights:
            weights = xp.mean(weights, axis=1)
        return out, (weights[0] if unbatched else weights)

    def _project(self, query, key, value, self_attention: bool):
        e = self.embed_dim
        if self.packed_projection and self_attention:
            qkv = self.project("qkv", query)  # one (E, 3E) product for self-attention
            return qkv[..., :e], qkv[..., e:2 * e], qkv[..., 2 * e:]
        return [self.project(name, x) for name, x in (("q", query), ("k", key), ("v", value))]

    def projection_weight(self, name: str):
        """W^T of one of the op's constant projections: qkv (the packed one), q, k, v or out."""
        return {"qkv": self.in_proj_t, "q": self.q_proj_t, "k": self.k_proj_t, "v": self.v_proj_t,
                "out": self.out_proj_t}[name]

    def projection_bias(self, name: str):
        """The bias of one of the op's projections, or None."""
        if name == "out":
            return self.out_bias
        if name == "qkv" or self.in_bias is None:
            return self.in_bias
        i, e = "qkv".index(name), self.embed_dim
        return self.in_bias[i * e:(i + 1) * e]

    def project(self, name: str, x):
        """x @ W^T (+ bias), one of the op's constant projections; a backend's kernel may compute it
        elsewhere."""
        weight_t, bias = self.projection_weight(name), self.projection_bias(name)
        y = self.xp.matmul(x, weight_t)
        if bias is not None:
            y += bias
        return y

    def multi_head(self, q, k, v, masks):
        """``attend`` for each head of the (N, L, E) queries and (N, S, E) keys and values: the (N, L, E)
        output, heads side by side, and the weights when the op gives them (else None).  A backend's
        kernel may compute it another way."""
        batch, length = q.shape[:2]
        q, k, v = (self._split_heads(t) for t in (q, k, v))
        out, weights = self.attention(q, k, v, self.scale, masks, keep_weights=self.need_weights)
        return self.xp.reshape(self.xp.permute_dims(out, (0, 2, 1, 3)), (batch, length, self.embed_dim)), weights

    def _split_heads(self, x):
        """(N, T, E) -> (N, heads, T, head_dim)."""
        n, t = x.shape[:2]
        return self.xp.permute_dims(self.xp.reshape(x, (n, t, self.num_heads, self.head_dim)), (0, 2, 1, 3))

    def _pad_masks(self, attn_mask, padding_mask):
        """One more key (bias_k or the zero key): each mask gets a column that blocks nothing."""
        xp = self.xp
        padded = []
        for mask in (attn_mask, padding_mask):
            if mask is not None:
                column = xp.zeros(mask.shape[:-1] + (1,), dtype=mask.dtype)
                mask = xp.concat([mask, column], axis=-1)
            padded.append(mask)
        return padded

    def _masks(self, attn_mask, padding_mask, batch, length, source, dtype):
        xp = self.xp
        masks = []
        if attn_mask is not None:
            if attn_mask.ndim == 2 and attn_mask.shape == (length, source):
                masks.append(additive_mask(xp, attn_mask, dtype, true_means_keep=False))
            elif attn_mask.ndim == 3 and attn_mask.shape == (batch * self.num_heads, length, source):
                mask = xp.reshape(attn_mask, (batch, self.num_heads, length, source))
                masks.append(additive_mask(xp, mask, dtype, true_means_keep=False))
            else:
                raise ShapeError(f"{self.node.describe()}: attn_mask must be ({length}, {source}) or "
                                 f"({batch * self.num_heads}, {length}, {source}), found {_shape(attn_mask)}")
        if padding_mask is not None:
            if padding_mask.shape != (batch, source) and not (padding_mask.ndim == 1 and batch == 1):
                raise ShapeError(f"{self.node.describe()}: key_padding_mask must be ({batch}, {source}), "
                                 f"found {_shape(padding_mask)}")
            mask = xp.reshape(padding_mask, (batch, 1, 1, source))
            masks.append(additive_mask(xp, mask, dtype, true_means_keep=False))
        return masks


OPS = [ScaledDotProductAttention, MultiheadAttention]
