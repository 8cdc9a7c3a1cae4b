"""HLO rng-bit-generator -> RandomBits (XLA's Philox and Threefry, bit for bit); rng -> RandomNumbers.

``rng_default`` is Philox, the algorithm XLA's CPU backend expands it to. The result is
``(new state, bits)``. ``rng`` has no defined bits (XLA leaves generator and seed to the backend):
kuiper's numbers follow the distribution, from a fixed Philox state. stochastic-convert rounds
with the random bits it is given -> StochasticConvert.
"""

from __future__ import annotations

from ..model_ir import OpNode
from .site import Site
from .translate_common import result, word

ALGORITHMS = {"rng_default": "philox", "rng_philox": "philox", "rng_three_fry": "threefry"}
BIT_TYPES = ("uint32", "int32", "uint64", "int64")


def translate_rng_bit_generator(site: Site) -> list[OpNode]:
    algorithm = word(site, "algorithm", "rng_default")
    if algorithm not in ALGORITHMS:
        raise site.error(f"algorithm={algorithm} must be one of {', '.join(ALGORITHMS)}")
    shape = site.instruction.shape
    if not shape.is_tuple or len(shape.elements) != 2 or shape.elements[1].is_tuple:
        raise site.error(f"expects a (state, bits) result, found {shape}")
    bits = shape.elements[1]
    if bits.dtype not in BIT_TYPES:
        raise site.error(f"makes {bits.element_type} bits; kuiper makes s32, u32, s64 and u64 bits")
    params = {"algorithm": ALGORITHMS[algorithm], "shape": list(bits.dims), "dtype": bits.dtype}
    return [site.op("RandomBits", site.inputs, site.outputs, params)]


def translate_stochastic_convert(site: Site) -> list[OpNode]:
    """Float to a signed integer type, as XLA's CPU backend runs it (other targets it refuses too)."""
    target = result(site)
    if target.element_type not in ("s8", "s16", "s32", "s64"):
        raise site.error(f"converts to {target.element_type}; XLA's CPU backend (and kuiper) convert "
                         "stochastically to signed integers only")
    return [site.op("StochasticConvert", site.inputs, site.outputs, {"dtype": target.dtype})]


DISTRIBUTIONS = {"rng_uniform": "uniform", "rng_normal": "normal"}


def translate_rng(site: Site) -> list[OpNode]:
    distribution = word(site, "distribution")
    if distribution not in DISTRIBUTIONS:
        raise site.error(f"distribution={distribution} must be one of {', '.join(DISTRIBUTIONS)}")
    shape = result(site)
    params = {"distribution": DISTRIBUTIONS[distribution], "shape": list(shape.dims), "dtype": shape.dtype}
    return [site.op("RandomNumbers", site.inputs, site.outputs, params)]


TRANSLATORS = {"rng-bit-generator": translate_rng_bit_generator, "rng": translate_rng,
               "stochastic-convert": translate_stochastic_convert}
