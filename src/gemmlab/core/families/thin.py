"""The thin family: rung 23 (thin, FP32; C with a side of at most ``THIN_MAX``: its tile sides,
shared memory, constraints and the dispatch rule's tile), rung 24 (decode, 16-bit) and rung 28
(decode_fp8, FP8 scaled; both rungs' geometry, constraints and rules in core/decode.py)."""

from __future__ import annotations

from .. import decode as _decode
from ..parts import ANY_16BIT_OUTPUT, Reads, ThinRule
from ..schema import SPLITK_SPACE, Rung
from .common import MAX_SMEM_PER_BLOCK, splitk_constraints

THIN_MAX = 32           # the widest thin side the kernel takes (its 4-k chunks x 8 k groups)


def thin_sides(cfg) -> tuple[int, int]:
    """(thin, wide) sides of a thin tile: N is the thin one when BN <= BM, else M (23_thin.cu)."""
    return min(cfg["BM"], cfg["BN"]), max(cfg["BM"], cfg["BN"])


def thin_smem(cfg) -> int:
    """23_thin.cu's dynamic shared memory, the larger of its two uses: STAGES stages of the wide
    operand's BR x BK tile (rows padded by 16 floats in the layout that pads) and the thin one's
    BK x NS tile (rows of NS + 4 floats when NS/4 is even), or after the K loop the THREADS/4
    slots of BR x NS partial sums (+4 floats each), FP32."""
    ns, br = thin_sides(cfg)
    q_ld = ns + (0 if (ns // 4) % 2 else 4)
    pipe = cfg["STAGES"] * cfg["BK"] * (br + (16 if br % 32 == 0 else 0) + q_ld) * 4
    red = cfg["THREADS"] // 4 * (br * ns + 4) * 4
    return max(pipe, red)


def thin_constraints(cfg) -> list[str]:
    """What 23_thin.cu static_asserts: a thin side of 4..32 in steps of 4, a wide side of 16 or 32
    rows (whole 16-row groups; 64 rows spilled under NVRTC 13.0 on the H100), whole 4-k chunks of each K tile per thread (BK a multiple of THREADS), at most
    128 partial sums per thread, at least 2 stages; shared memory within a block's."""
    ns, br = thin_sides(cfg)
    out = []
    if ns % 4 or ns > THIN_MAX:
        out.append(f"the thin side min(BM, BN)={ns} must be a multiple of 4, at most {THIN_MAX}")
    if br % 16 or br > 32:
        out.append(f"the wide side max(BM, BN)={br} must be 16 or 32 (4 row groups of float4; 64-row tiles, 16 rows "
                   f"per thread, spilled 8-16 bytes under NVRTC 13.0)")
    if cfg["BK"] % cfg["THREADS"]:
        out.append(f"BK={cfg['BK']} must be a multiple of THREADS={cfg['THREADS']} (each thread takes whole 4-k "
                   f"chunks of every K tile)")
    if br // 4 * ns > 128:
        out.append(f"a {cfg['BM']}x{cfg['BN']} tile gives each thread {br // 4}x{ns} = {br // 4 * ns} partial sums; "
                   f"at most 128 fit the registers")
    if cfg["STAGES"] < 2:
        out.append(f"STAGES={cfg['STAGES']} must be at least 2 (a stage in flight while one is computed)")
    if not out and thin_smem(cfg) > MAX_SMEM_PER_BLOCK:
        out.append(f"the tile needs {thin_smem(cfg)} B of shared memory; a block may have at most {MAX_SMEM_PER_BLOCK} B")
    return out


def thin_rule_config(rung: Rung, M: int, N: int) -> dict[str, int]:
    """The thin tile for a kernel-view M x N (one of them at most ``rung.thin``): the thin side the
    smallest of 4, 8, 16, 32 that holds it, the wide side 32 rows (16 beside a thin side of 32: at
    most 128 partial sums per thread), the rung's other defaults."""
    thin = min(M, N)
    ns = next(s for s in (4, 8, 16, 32) if s >= min(thin, THIN_MAX))
    br = min(32, 512 // ns)
    bm, bn = (br, ns) if N <= M else (ns, br)
    return rung.config({"BM": bm, "BN": bn})


# ---- the entries (core/registry.py lists every family's in ladder order) --------------------
RUNGS: tuple[Rung, ...] = (
    Rung(
        23, "thin", "Thin GEMM: the wide operand streamed once, K split over the warps",
        "For C with a side of at most 32: BR x NS tiles, the wide operand copied once by 16-byte cp.async in its own layout, the thin one read by broadcast, each warp a share of every K tile, the partial sums added in shared memory in a fixed order.",
        ("beyond the seeds: issue 9's few-output-tile shapes (16x4096x4096, 4096x16x4096)",), "23_thin.cu",
        params={"BM": 32, "BN": 16, "BK": 128, "THREADS": 128, "STAGES": 3, "SPLITK": 1},
        presets={"tall": {"BM": 32, "BN": 16, "BK": 128, "THREADS": 128, "STAGES": 3},
                 "wide": {"BM": 16, "BN": 32, "BK": 128, "THREADS": 128, "STAGES": 3},
                 # 8 warps: two per scheduler (Nsight Compute at 4096x16x4096 with 4 warps found
                 # each warp issuing a minority of its cycles and DRAM well short of busy:
                 # benchmarks/profiles/h100_profile_thin_fp32_4096x16x4096.json)
                 "tall256": {"BM": 32, "BN": 16, "BK": 256, "THREADS": 256, "STAGES": 3},
                 "wide256": {"BM": 16, "BN": 32, "BK": 256, "THREADS": 256, "STAGES": 3},
                 "tall8": {"BM": 32, "BN": 8, "BK": 128, "THREADS": 128, "STAGES": 3},
                 "wide8": {"BM": 8, "BN": 32, "BK": 128, "THREADS": 128, "STAGES": 3}},
        constraints=lambda c: thin_constraints(c) + splitk_constraints(c), smem=thin_smem,
        sass_claims=("LDGSTS", "LDS.128", "FFMA"), min_arch=80, thin_rule=ThinRule(16),
        space={"BM": (4, 8, 16, 32), "BN": (4, 8, 16, 32), "BK": (64, 128, 256),
               "THREADS": (64, 128, 256), "STAGES": (2, 3, 4, 6), "SPLITK": SPLITK_SPACE},
    ),
    Rung(
        24, "decode", "Decode: thin 16-bit GEMM streaming the wide operand into mma.sync fragments",
        "For 16-bit C with a side of at most 32 (LLM decoding): each thread's 16-byte loads of the wide operand are its mma.sync fragments (the k order permuted to match, byte permutes where it is contiguous along its wide side), the chunks in flight in a ring of registers or (ASYNC) of shared memory filled by cp.async, K split over the warps of a block and the blocks of a cluster, the partial sums added in a fixed order.",
        ("beyond the seeds: issue 40's decode shapes (M of 1 to 32 against 4096-14336 x 4096-14336 weights)",),
        "24_decode.cu", dtypes=("fp16", "bf16"),
        # the default tile: N thin (16), as the bench's thin shape 4096x16x4096 is; decode's M-thin
        # tiles are the presets m8 and m32 (auto's rule sizes both, core/decode.py)
        params={"BM": 64, "BN": 16, "BK": 128, "WK": 4, "DEPTH": 2, "L2PF": 0, "ASYNC": 0, "SPLITK": 1, "SKCLUSTER": 0},
        presets={"m8": {"BM": 8, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 2},
                 "m32": {"BM": 32, "BN": 64, "BK": 128, "WK": 4, "DEPTH": 2},
                 "n8": {"BM": 64, "BN": 8, "BK": 128, "WK": 4, "DEPTH": 2},
                 "n32": {"BM": 64, "BN": 32, "BK": 128, "WK": 4, "DEPTH": 2},
                 "m8_deep": {"BM": 8, "BN": 64, "BK": 256, "WK": 8, "DEPTH": 4}},
        threads=_decode.threads, constraints=lambda c: _decode.constraints(c, MAX_SMEM_PER_BLOCK) + splitk_constraints(c),
        smem=_decode.smem,
        sass_claims=("HMMA.16816", "LDG.E.128"), min_arch=80, thin_rule=ThinRule(_decode.THIN16_MAX, _decode.rule),
        stores=ANY_16BIT_OUTPUT,   # its scalar stores round each output to C's type
        space={"BM": (8, 16, 32, 64, 128), "BN": (8, 16, 32, 64, 128), "BK": (128, 256), "WK": (1, 2, 4, 8),
               "DEPTH": (2, 3, 4), "L2PF": (0, 1), "ASYNC": (0, 1), "SPLITK": SPLITK_SPACE,
               "SKCLUSTER": (0, 1)},
    ),
    Rung(
        28, "decode_fp8", "FP8 decode: thin scaled matmul streaming FP8 weights into mma.sync",
        "Rung 24's streaming for FP8 codes (gemmlab.scaled_mm with M or N of at most 32): each 16-byte unit of a K-major row is 16 k, converted in registers to fp16 pairs (cvt.rn.f16x2.e4m3x2/e5m2x2: Hopper's mma.sync has no FP8 form in hardware) for four mma.sync m16n8k16 with FP32 sums per 64-k chunk, the chunks in flight in a ring of shared memory filled by cp.async (every edge a zero fill), tensor-wise and row-wise scales applied as each output is stored and block scales to each chunk's sums, K split over the warps of a block and the blocks of a cluster in a fixed order.",
        ("beyond the seeds: issue 42's FP8 products at decoding's M (1 to 32 against 4096-14336 x 4096-14336 FP8 weights)",),
        "28_decode_fp8.cu", dtypes=("fp8",), precisions=("fp8", "fp8_fast"),
        # the default tile: M thin (8), as FP8 decoding is; N-thin tiles are the presets n8 and n32
        params={"BM": 8, "BN": 64, "BK": 256, "WK": 4, "WT": 1, "DEPTH": _decode.FP8_DEPTH, "L2PF": 1, "SPLITK": 1,
                "SKCLUSTER": 0},
        presets={"m8": {"BM": 8, "BN": 64, "BK": 256, "WK": 4},
                 "m32": {"BM": 32, "BN": 64, "BK": 256, "WK": 4},
                 "n8": {"BM": 64, "BN": 8, "BK": 256, "WK": 4},
                 "n32": {"BM": 64, "BN": 32, "BK": 256, "WK": 4}},
        threads=_decode.threads,
        constraints=lambda c: _decode.fp8_constraints(c, MAX_SMEM_PER_BLOCK) + splitk_constraints(c),
        smem=_decode.fp8_smem,
        # the codes converted to fp16 (F2FP) for HMMA.16816 (the kernel's header)
        sass_claims=("HMMA.16816.F32", "F2FP.F16.E4M3.UNPACK_B", "LDGSTS.E.BYPASS", "LDS.128"), min_arch=90,
        thin_rule=ThinRule(_decode.FP8_THIN_MAX, _decode.fp8_rule), reads=Reads(k_major=True),
        stores=ANY_16BIT_OUTPUT,   # its scalar stores round each output to C's type
        space={"BM": (8, 16, 32, 64, 128), "BN": (8, 16, 32, 64, 128), "BK": (128, 256, 512), "WK": (1, 2, 4, 8),
               # L2PF=0 led at none of the decode shapes timed (h200_fp8_decode.json.gz)
               "WT": (1, 2), "DEPTH": (2, 3, 4), "L2PF": (1,), "SPLITK": (1, 2, 4, 8), "SKCLUSTER": (0, 1)},
    ),
)
