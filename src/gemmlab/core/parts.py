"""A rung's features as named parts (core/schema.py's ``Rung`` holds one of each): what its kernel
reads (``Reads``), how it writes C (``Stores``), how its blocks walk the tiles (``Walk``), what
changes in a precision (``PrecisionPart``) and, for a rung of thin problems only, its rule
(``ThinRule``). Each part's defaults are the plainest kernel's (the teaching rungs name none), so
an entry names only what its kernel does beyond them, and a feature of one rung is a field of a
part, not of every rung.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass(frozen=True)
class Reads:
    """How the kernel reads A and B.

    ``tensor_maps``: also as TMA tensor maps (core/tensormaps.py), each operand whose 16-byte
    access is legal. ``textures``: through texture objects, the texel width in floats where 16-byte
    access is legal (1: float, 4: float4); 0: none. ``packs``: it has 16-byte fast paths, and so a
    PACK parameter (0 or 1, default 0) that copies an operand they cannot read first
    (core/packing.py). ``k_major``: it reads K-major, 16-byte-legal A and B only (row-major A,
    column-major B): the plan always copies the others first, transposing an MN-major one.
    ``register_a``: the precisions in which it also reads a column-major (MN-major) A into
    registers (wgmma's register-A form); the plan then computes a row-major-A-and-B problem
    transposed instead of copying B (core/packing.py, for_kernel). ``staging``: the dynamic shared
    memory its kernel adds, after its own (``Rung.smem``), for the operands it reads without 16-byte
    access, as bytes of (cfg, vec_a, vec_b); None: none (``Rung.smem_for`` sums them)."""

    tensor_maps: bool = False
    textures: int = 0
    packs: bool = False
    k_major: bool = False
    register_a: tuple[str, ...] = ()
    staging: Callable[[Mapping[str, int], bool, bool], int] | None = None


@dataclass(frozen=True)
class Stores:
    """How the kernel writes C.

    ``outputs``: the C dtypes it writes beside its operands' own (an output dtype, GL_C_DTYPE).
    ``store_map``: C passed as a third tensor map (its EPI_TMA switch: 1 stores C through TMA where
    C has 16-byte access and beta == 0, 0 never). ``store_twin``: a second build of each EPI_TMA=1
    variant with only the TMA store's epilogue (Variant.store_twin, GL_TMA_STORE_ONLY), which a plan
    launches for the calls the TMA store serves."""

    outputs: tuple[str, ...] = ()
    store_map: bool = False
    store_twin: bool = False


@dataclass(frozen=True)
class Walk:
    """How the blocks walk the output tiles.

    ``persistent``: one block per SM (up to the tiles), each looping over tiles in clusters of
    CLUSTER blocks: its launch needs the SM count. ``batched``: a batch of problems in one launch
    (GL_BATCHED, core/batched.py): a persistent schedule walks batch x units, another grid's z holds
    the elements. ``grouped``: groups of different M (GL_GROUPED, core/grouped.py), their sizes read
    on the device; a plain call is one group of M rows. ``tail_kernel``: a non-persistent rung's
    stream-K tail, a second entry point its STREAMK=1 variant launches after the main one
    (Launch.streamk)."""

    persistent: bool = False
    batched: bool = False
    grouped: bool = False
    tail_kernel: str = ""


@dataclass(frozen=True)
class PrecisionPart:
    """What differs when the rung computes in one precision: the ``planes`` per operand its kernel
    reads (3xTF32: 2, the big and small TF32 parts of the plan's split pack), the defaults that
    differ (``params``: a stage of two planes needs a smaller tile), its own ``presets`` (None:
    the rung's) and the problems with a configuration in this precision beyond the rung's own
    (``constraints``, cfg -> messages: FP8's promotion holds a second set of accumulators). The
    rung's ``smem`` and ``constraints`` take the planes as their second argument."""

    planes: int = 1
    params: Mapping[str, int] = field(default_factory=dict)
    presets: Mapping[str, Mapping[str, int]] | None = None
    constraints: Callable[[Mapping[str, int]], list[str]] | None = None


@dataclass(frozen=True)
class ThinRule:
    """A rung for thin problems only: the rule gives it the problems whose M or N (kernel view) is
    at most ``max_side``, and never takes it as its dtype's top rung. ``choose``: its own choice of
    configuration, (M, N, K, sm_count, arch, a_col, b_col, vec_a, vec_b, unaligned) -> (overrides, why)
    in the kernel view, or None where it declines the problem (``unaligned``: the selection model
    asks for operands without 16-byte access too); None: registry.thin_rule_config."""

    max_side: int
    choose: Callable[..., tuple[dict, str] | None] | None = None


# the parts several rungs share
TMA_READS = Reads(tensor_maps=True, packs=True)            # TMA boxes, unaligned operands copied
ANY_16BIT_OUTPUT = Stores(outputs=("fp32", "fp16", "bf16"))   # stores that round to whatever C is
