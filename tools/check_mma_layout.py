"""CPU emulation of rung 17's index math (src/gemmlab/kernels/17_mma_sync.cu), for a machine
without a GPU.

The functions below restate, formula for formula, what the kernel computes (the names follow the
kernel: GlSwz, GlTileCopy, a_lane/a_off, b_lane/b_off, the stage rotation, the epilogue), and run
them against the PTX ISA's definitions of ldmatrix (.x4, .trans) and of the mma.m16n8k16 fragment
layouts. Checked, for every A/B layout:

* the swizzle: each stage's copies write every 16-byte chunk of the tile exactly once, and the 8
  chunks of each 8-lane phase of a copy fall in 8 distinct bank groups;
* the fragment addresses: the kernel's add/XOR shortcuts equal the plain (row, chunk) formula, and
  each 8x8 matrix of an ldmatrix.x4 reads 8 distinct bank groups (no conflicts);
* the pipeline: every fragment read finds its tile in the stage, its copies waited for before a
  barrier, and no copy overwrites a stage before the barrier after its last read;
* end to end: C = A @ B for ragged M, N, K through the copies (with their byte counts and pointer
  arithmetic, reading from memory padded with NaN past each row and failing on any address
  outside the allocation), ldmatrix, mma and the epilogue's staging, every output written once.

Run: ``python tools/check_mma_layout.py`` (tests/test_mma_layout.py runs the same checks).
"""

from __future__ import annotations

import itertools

import numpy as np

DEFAULT = {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4}


class Swz:
    """GlSwz<INNER>: logical chunk c of row r lives at chunk c ^ ((r & 7) / RDIV) of row r."""

    def __init__(self, inner: int):
        self.inner, self.cpr = inner, inner // 8
        self.rdiv = 8 // min(self.cpr, 8)

    def off(self, r: int, c: int) -> int:   # element offset in a stage
        return r * self.inner + ((c ^ ((r & 7) // self.rdiv)) << 3)


def geometry(cfg: dict, a_col: bool, b_col: bool) -> dict:
    g = dict(cfg)
    g["THREADS"] = 32 * (cfg["BM"] // cfg["WM"]) * (cfg["BN"] // cfg["WN"])
    g["WARPS_N"] = cfg["BN"] // cfg["WN"]
    g["FM"], g["FN"], g["KSTEPS"] = cfg["WM"] // 16, cfg["WN"] // 8, cfg["BK"] // 16
    g["A"] = (cfg["BK"], cfg["BM"]) if a_col else (cfg["BM"], cfg["BK"])    # (OUTER, INNER)
    g["B"] = (cfg["BN"], cfg["BK"]) if b_col else (cfg["BK"], cfg["BN"])
    return g


def copy_chunks(outer: int, inner: int, threads: int):
    """GlTileCopy's split: thread tid copies rows r0 + p*RSTEP of chunk c (tid, p, r, c)."""
    cpr = inner // 8
    assert threads % cpr == 0
    rstep, per = threads // cpr, -(-outer * inner // 8 // threads)
    for tid, p in itertools.product(range(threads), range(per)):
        r = tid // cpr + p * rstep
        if r < outer:
            yield tid, p, r, tid % cpr


def bank_groups_distinct(byte_addrs) -> bool:
    groups = [(a // 16) % 8 for a in byte_addrs]
    return len(set(groups)) == len(groups)


def check_copies(g: dict) -> None:
    for outer, inner in (g["A"], g["B"]):
        sw = Swz(inner)
        chunks = list(copy_chunks(outer, inner, g["THREADS"]))
        offs = sorted(sw.off(r, c) for _, _, r, c in chunks)
        assert offs == list(range(0, outer * inner, 8)), "the copies must cover the tile once"
        by_phase: dict[tuple, list[int]] = {}
        for tid, p, r, c in chunks:
            by_phase.setdefault((tid // 8, p), []).append(2 * sw.off(r, c))
        for phase, addrs in by_phase.items():
            assert bank_groups_distinct(addrs), f"copy bank conflict {g['A'], g['B']} phase {phase}"


def lane_offsets(g: dict, a_col: bool, b_col: bool, wm: int, wn: int):
    """The kernel's per-lane byte offsets: a_off(i, kk) and b_off(j2, kk) as functions, with the
    plain (row, chunk) formula beside each for comparison."""
    BM, BN, BK, WM, WN = g["BM"], g["BN"], g["BK"], g["WM"], g["WN"]
    sa, sb = Swz(g["A"][1]), Swz(g["B"][1])
    out = []
    for lane in range(32):
        q, i8 = lane // 8, lane % 8
        if a_col:
            a_lane = (8 * (q // 2) + i8) * (2 * BM) + ((((wm * WM) // 8) ^ (q % 2) ^ (i8 // sa.rdiv)) << 4)
            a_off = lambda i, kk, L=a_lane: (L ^ (32 * i)) + kk * (32 * BM)
            a_ref = lambda i, kk, q=q, i8=i8: 2 * sa.off(16 * kk + 8 * (q // 2) + i8, (wm * WM + 16 * i) // 8 + q % 2)
        else:
            a_lane = (wm * WM + 8 * (q % 2) + i8) * (2 * BK) + (((q // 2) ^ (i8 // sa.rdiv)) << 4)
            a_off = lambda i, kk, L=a_lane: (L ^ (32 * kk)) + i * (32 * BK)
            a_ref = lambda i, kk, q=q, i8=i8: 2 * sa.off(wm * WM + 16 * i + 8 * (q % 2) + i8, 2 * kk + q // 2)
        if b_col:
            b_lane = (wn * WN + 8 * (q // 2) + i8) * (2 * BK) + (((q % 2) ^ (i8 // sb.rdiv)) << 4)
            b_off = lambda j2, kk, L=b_lane: (L ^ (32 * kk)) + j2 * (32 * BK)
            b_ref = lambda j2, kk, q=q, i8=i8: 2 * sb.off(wn * WN + 16 * j2 + 8 * (q // 2) + i8, 2 * kk + q % 2)
        else:
            b_lane = (8 * (q % 2) + i8) * (2 * BN) + ((((wn * WN) // 8) ^ (q // 2) ^ (i8 // sb.rdiv)) << 4)
            b_off = lambda j2, kk, L=b_lane: (L ^ (32 * j2)) + kk * (32 * BN)
            b_ref = lambda j2, kk, q=q, i8=i8: 2 * sb.off(16 * kk + 8 * (q % 2) + i8, (wn * WN + 16 * j2) // 8 + q // 2)
        out.append((a_off, a_ref, b_off, b_ref))
    return out


def check_fragment_addresses(g: dict, a_col: bool, b_col: bool) -> None:
    for wm, wn in itertools.product(range(g["BM"] // g["WM"]), range(g["WARPS_N"])):
        lanes = lane_offsets(g, a_col, b_col, wm, wn)
        for kk in range(g["KSTEPS"]):
            pieces = [(0, i) for i in range(g["FM"])] + [(2, j2) for j2 in range(g["FN"] // 2)]
            for which, n in pieces:
                addrs = [lanes[lane][which](n, kk) for lane in range(32)]
                assert addrs == [lanes[lane][which + 1](n, kk) for lane in range(32)], \
                    f"{'AB'[which // 2]} fragment {n} k-step {kk}: shortcut != plain formula"
                for q in range(4):
                    assert bank_groups_distinct(addrs[8 * q:8 * q + 8]), f"ldmatrix bank conflict {which, n, kk, q}"


# ---- end to end ------------------------------------------------------------------------------
class Memory:
    """A matrix as the kernel sees it: P(outer, inner) = P[outer * ld + inner], a flat allocation
    of n_outer rows of ld elements whose padding past n_inner holds NaN."""

    def __init__(self, logical: np.ndarray, pad: int):
        n_outer, n_inner = logical.shape
        self.ld = n_inner + pad
        flat = np.full((n_outer, self.ld), np.nan)
        flat[:, :n_inner] = logical
        self.flat = flat.reshape(-1)

    def read(self, off: int, n: int) -> np.ndarray:
        assert 0 <= off and off + n <= self.flat.size, f"read of [{off}, {off + n}) outside the allocation"
        return self.flat[off:off + n]


def copy_tile(g, smem, stage, mem, operand, outer0, inner0, n_outer, n_inner, k_inner, kt):
    """GlTileCopy::copy for one block (all threads): byte counts, pointers, destination chunks."""
    outer, inner = g[operand]
    sw, bk, threads = Swz(inner), g["BK"], g["THREADS"]
    rstep = threads // sw.cpr
    for tid, p, r, c in copy_chunks(outer, inner, threads):
        r0 = tid // sw.cpr
        first = (outer0 + r0) * mem.ld + inner0 + 8 * c
        kstride = bk if k_inner else bk * mem.ld
        ol = n_outer - (outer0 + r0) - (0 if k_inner else kt * bk)
        il = n_inner - (inner0 + 8 * c) - (kt * bk if k_inner else 0)
        ok = ol > p * rstep and il > 0
        nbytes = (16 if il >= 8 else 2 * il) if ok else 0
        dst = sw.off(r, c)
        smem[stage, dst:dst + 8] = 0.0
        if nbytes:
            smem[stage, dst:dst + nbytes // 2] = mem.read(first + kt * kstride + p * rstep * mem.ld, nbytes // 2)


def ldmatrix_x4(stage_mem: np.ndarray, byte_addrs, trans: bool) -> np.ndarray:
    """regs[lane, j] = the 2 elements of matrix j that lane receives (PTX ISA, ldmatrix)."""
    regs = np.empty((32, 4, 2))
    for j in range(4):
        rows = np.stack([stage_mem[a // 2:a // 2 + 8] for a in byte_addrs[8 * j:8 * j + 8]])   # 8x8
        m = rows.T if trans else rows
        for lane in range(32):
            regs[lane, j] = m[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2]
    return regs


def mma16816(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """acc[lane, 0..3] += A(16x16) @ B(16x8) with the mma.m16n8k16 fragment layouts: a[lane, 0..3]
    = (row g, k 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); b[lane, 0..1] = (k 2t.., n g),
    (k 2t+8.., n g); c0,c1 = (g, 2t..), c2,c3 = (g+8, 2t..); g = lane/4, t = lane%4."""
    A, B = np.empty((16, 16)), np.empty((16, 8))
    for lane in range(32):
        gq, t = lane // 4, lane % 4
        for reg, (dr, dk) in enumerate(((0, 0), (8, 0), (0, 8), (8, 8))):
            A[gq + dr, 2 * t + dk:2 * t + dk + 2] = a[lane, reg]
        for reg, dk in enumerate((0, 8)):
            B[2 * t + dk:2 * t + dk + 2, gq] = b[lane, reg]
    D = A @ B
    for lane in range(32):
        gq, t = lane // 4, lane % 4
        acc[lane] += [D[gq, 2 * t], D[gq, 2 * t + 1], D[gq + 8, 2 * t], D[gq + 8, 2 * t + 1]]


class Pipeline:
    """The commit-group / wait / barrier accounting of the kernel's main loop."""

    def __init__(self, stages: int):
        self.epoch, self.groups, self.open, self.done_at = 0, [], [], {}
        self.holds = [None] * stages          # stage -> (tile, group)
        self.last_read = [-1] * stages

    def copy(self, stage: int, tile: int) -> None:
        assert self.last_read[stage] < self.epoch, f"stage {stage} overwritten before the barrier after its last read"
        self.open.append(stage)
        self.holds[stage] = (tile, len(self.groups))

    def commit(self) -> None:
        self.groups.append(self.open)
        self.open = []

    def wait(self, pending: int) -> None:
        for gid in range(len(self.groups) - pending):
            self.done_at.setdefault(gid, self.epoch)

    def barrier(self) -> None:
        self.epoch += 1

    def read(self, stage: int, tile: int, ntiles: int) -> None:
        self.last_read[stage] = self.epoch
        if tile < ntiles:      # the last iteration's look-ahead reads a stage it never uses
            held, gid = self.holds[stage]
            assert held == tile, f"stage {stage} holds tile {held}, expected {tile}"
            assert self.done_at.get(gid, self.epoch) < self.epoch, f"tile {tile} read before its copies were waited for"


def warp_loop_state(g: dict):
    """Per warp: two fragment register sets and the FP32 accumulators (lane-major)."""
    return {"af": [[None] * g["FM"] for _ in range(2)], "bf": [[None] * g["FN"] for _ in range(2)],
            "acc": np.zeros((g["FM"], g["FN"], 32, 4))}


def load_frags(g, a_col, b_col, smA, smB, lanes, w, fset, stage, kk) -> None:
    """The kernel's load_frags: ldmatrix.x4 (trans for column-major A, row-major B)."""
    for i in range(g["FM"]):
        w["af"][fset][i] = ldmatrix_x4(smA[stage], [lanes[lane][0](i, kk) for lane in range(32)], a_col)
    for j2 in range(g["FN"] // 2):
        r = ldmatrix_x4(smB[stage], [lanes[lane][2](j2, kk) for lane in range(32)], not b_col)
        w["bf"][fset][2 * j2], w["bf"][fset][2 * j2 + 1] = r[:, 0:2], r[:, 2:4]


def epilogue(g, w, wm, wn, row0, col0, M, N, C, written) -> None:
    """Per warp: accumulators -> staging [16][WN+8] -> 8 outputs per lane and round."""
    WN, vpr = g["WN"], g["WN"] // 8
    for i in range(g["FM"]):
        cs = np.full((16, WN + 8), np.nan)
        for j, lane in itertools.product(range(g["FN"]), range(32)):
            gq, c2 = lane // 4, 2 * (lane % 4)
            cs[gq, 8 * j + c2:8 * j + c2 + 2] = w["acc"][i, j, lane, 0:2]
            cs[gq + 8, 8 * j + c2:8 * j + c2 + 2] = w["acc"][i, j, lane, 2:4]
        for p, lane in itertools.product(range(16 * vpr // 32), range(32)):
            v = lane + 32 * p
            r, c = v // vpr, (v % vpr) * 8
            row = row0 + wm * g["WM"] + 16 * i + r
            for e in range(8):
                col = col0 + wn * WN + c + e
                if row < M and col < N:
                    C[row, col] = cs[r, c + e]
                    written[row, col] += 1


def run_block(g, a_col, b_col, mems, M, N, K, bx, by, C, written) -> None:
    """One block, all warps in step between barriers, mirroring the kernel's prologue, main loop
    and epilogue (copies land at issue; Pipeline checks that no read could see them unfinished)."""
    S, BK, KSTEPS = g["STAGES"], g["BK"], g["KSTEPS"]
    row0, col0, ntiles = by * g["BM"], bx * g["BN"], -(-K // BK)
    smA, smB = np.full((S, g["A"][0] * g["A"][1]), np.nan), np.full((S, g["B"][0] * g["B"][1]), np.nan)
    memA, memB = mems
    pipe = Pipeline(S)

    def load_tiles(s, kt):
        pipe.copy(s, kt)
        if a_col:
            copy_tile(g, smA, s, memA, "A", 0, row0, K, M, False, kt)
        else:
            copy_tile(g, smA, s, memA, "A", row0, 0, M, K, True, kt)
        if b_col:
            copy_tile(g, smB, s, memB, "B", col0, 0, N, K, True, kt)
        else:
            copy_tile(g, smB, s, memB, "B", 0, col0, K, N, False, kt)

    warps = [(wm, wn) for wm in range(g["BM"] // g["WM"]) for wn in range(g["WARPS_N"])]
    lanes = {wp: lane_offsets(g, a_col, b_col, *wp) for wp in warps}
    state = {wp: warp_loop_state(g) for wp in warps}
    for s in range(S - 1):
        load_tiles(s, s)
        pipe.commit()
    pipe.wait(S - 2)
    pipe.barrier()
    pipe.read(0, 0, ntiles)
    for wp in warps:
        load_frags(g, a_col, b_col, smA, smB, lanes[wp], state[wp], 0, 0, 0)
    rd, wr = 0, S - 1
    for t in range(ntiles):
        for kk in range(KSTEPS):
            if kk == KSTEPS - 1:
                pipe.wait(S - 2)
                pipe.barrier()
                rd = 0 if rd + 1 == S else rd + 1
            pipe.read(rd, t + (kk == KSTEPS - 1), ntiles)
            for wp in warps:
                load_frags(g, a_col, b_col, smA, smB, lanes[wp], state[wp], (kk + 1) % 2, rd, (kk + 1) % KSTEPS)
            if kk == 0:
                load_tiles(wr, t + S - 1)
                pipe.commit()
                wr = 0 if wr + 1 == S else wr + 1
            for wp in warps:
                w = state[wp]
                for i, j in itertools.product(range(g["FM"]), range(g["FN"])):
                    mma16816(w["acc"][i, j], w["af"][kk % 2][i], w["bf"][kk % 2][j])
    pipe.wait(0)
    pipe.barrier()
    for wp in warps:
        epilogue(g, state[wp], *wp, row0, col0, M, N, C, written)


def check_gemm(cfg: dict, a_col: bool, b_col: bool, M: int, N: int, K: int, seed: int = 0) -> None:
    g = geometry(cfg, a_col, b_col)
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, (M, K)).astype(np.float64)   # small integers: every sum is exact
    B = rng.integers(-3, 4, (K, N)).astype(np.float64)
    mems = (Memory(A.T if a_col else A, pad=3), Memory(B.T if b_col else B, pad=3))
    C, written = np.full((M, N), np.nan), np.zeros((M, N), dtype=int)
    for by, bx in itertools.product(range(-(-M // g["BM"])), range(-(-N // g["BN"]))):
        run_block(g, a_col, b_col, mems, M, N, K, bx, by, C, written)
    assert (written == 1).all(), "every output written exactly once"
    assert np.array_equal(C, A @ B), f"C != A @ B for {cfg} A {'col' if a_col else 'row'} B {'col' if b_col else 'row'}"


CONFIGS = [DEFAULT,
           {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3},
           {"BM": 32, "BN": 64, "BK": 64, "WM": 16, "WN": 32, "STAGES": 2},
           {"BM": 16, "BN": 16, "BK": 32, "WM": 16, "WN": 16, "STAGES": 4},
           {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 3}]


def shapes_for(cfg: dict) -> list[tuple[int, int, int]]:
    """Ragged in M, N and K (a partial 16-byte chunk at the K edge, two tiles of rows and columns);
    a K shorter than one tile for the small tiles (the prologue's copies past K)."""
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    out = [(bm + 5, bn + 3, 2 * bk + 5)]
    if bm * bn <= 64 * 64:
        out.append((2 * bm - 1, bn + 9, 5))
    return out


def main() -> None:
    for cfg, a_col, b_col in itertools.product(CONFIGS, (False, True), (False, True)):
        g = geometry(cfg, a_col, b_col)
        check_copies(g)
        check_fragment_addresses(g, a_col, b_col)
        for M, N, K in shapes_for(cfg):
            check_gemm(cfg, a_col, b_col, M, N, K)
        print(f"ok  {cfg}  A {'col' if a_col else 'row'}  B {'col' if b_col else 'row'}", flush=True)


if __name__ == "__main__":
    main()
