"""A training step of a linear layer with bias and activation, y = act(x @ w + b), forward and
backward, through gemmlab.torch.matmul in its two ways of getting the activation's gradient: the
pre-activation saved by the forward (matmul_epilogue_saved: the GEMM with its bias writing z, then
PyTorch's activation; what ``matmul`` runs when gradients are wanted) and recomputed by the backward
(matmul_epilogue: the activation fused into the GEMM, one more fused GEMM in the backward); beside
PyTorch's own step (F.gelu(x @ w + b)). Then the forwards alone: the saving operator's, one GEMM
writing y and z (``gemmlab.matmul(..., aux=z)``, the auxiliary output), and the fused GEMM writing y
only. Timing engine, shapes of the epilogue suite; the gradients and the auxiliary output's z are
checked against float64 first.

    python tools/epilogue_autograd.py --dtype bf16 --json benchmarks/results/h200_epilogue_autograd_bf16.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

import gemmlab
import gemmlab.torch  # noqa: F401  (registers the operators)
from gemmlab.analysis import environment
from gemmlab.bench import workloads
from gemmlab.core import activations
from gemmlab.core.shapes import EPILOGUE_ACTIVATION, EPILOGUE_SUITE
from gemmlab.measure import timing
from gemmlab.measure.verify import tolerance

TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def step_fns(x, w, b, g, activation: str):
    ops = torch.ops.gemmlab
    act = activations.get(activation).forward_torch
    inputs = (x, w, b)
    return {
        "saved": lambda: torch.autograd.grad(ops.matmul_epilogue_saved(x, w, b, activation, "auto", None)[0], inputs, g),
        "recompute": lambda: torch.autograd.grad(ops.matmul_epilogue(x, w, b, activation, "auto", None), inputs, g),
        "torch": lambda: torch.autograd.grad(act(x @ w + b), inputs, g),
    }, act


def measure(shape, dtype: str, activation: str, engine) -> dict:
    M, N, K = shape
    dt = TORCH[dtype]
    x = torch.randn(M, K, device="cuda", dtype=dt, requires_grad=True)
    w = (torch.randn(K, N, device="cuda", dtype=dt) / K ** 0.5).requires_grad_(True)
    b = torch.randn(N, device="cuda", dtype=dt, requires_grad=True)
    g = torch.randn(M, N, device="cuda", dtype=dt)
    fns, act = step_fns(x, w, b, g, activation)
    ref = [t.detach().double().requires_grad_(True) for t in (x, w, b)]
    want = torch.autograd.grad(act(ref[0] @ ref[1] + ref[2]), ref, g.double())
    errors = {}
    for name in ("saved", "recompute"):
        got = fns[name]()
        errors[name] = [float((gg.double() - ww).norm() / ww.norm()) for gg, ww in zip(got, want)]
    ops = torch.ops.gemmlab
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    y_buf, z_buf = torch.empty(M, N, device="cuda", dtype=dt), torch.empty(M, N, device="cuda", dtype=dt)
    gemmlab.matmul(xd, wd, bias=bd, activation=activation, out=y_buf, aux=z_buf)
    z = z_buf
    z_want = ref[0].detach() @ ref[1].detach() + ref[2].detach()
    errors["aux z"] = [float((z.double() - z_want).norm() / z_want.norm())]
    ok = all(e <= 4 * tolerance(dtype, max(M, K)) for errs in errors.values() for e in errs)
    run = engine.measure([timing.Candidate(n, f) for n, f in fns.items()])
    med = {k: v.median for k, v in run.samples.items()}
    forwards = {
        "aux forward": lambda: gemmlab.matmul(xd, wd, bias=bd, activation=activation, out=y_buf, aux=z_buf),
        "saving operator forward": lambda: ops.matmul_epilogue_saved(xd, wd, bd, activation, "auto", None),
        "fused forward": lambda: ops.matmul_epilogue(xd, wd, bd, activation, "auto", None),
    }
    frun = engine.measure([timing.Candidate(n, f) for n, f in forwards.items()])
    fmed = {k: v.median for k, v in frun.samples.items()}
    return {"M": M, "N": N, "K": K, "dtype": dtype, "activation": activation, "rel_errors": errors, "verified": ok,
            "median_ms": med, "recompute_vs_saved": med["recompute"] / med["saved"],
            "torch_vs_saved": med["torch"] / med["saved"], "samples": {k: v.as_dict() for k, v in run.samples.items()},
            "forward_median_ms": fmed,
            "aux_forward_vs_fused": fmed["aux forward"] / fmed["fused forward"],
            "saving_operator_vs_aux_forward": fmed["saving operator forward"] / fmed["aux forward"],
            "forward_samples": {k: v.as_dict() for k, v in frun.samples.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", default="bf16", choices=list(TORCH))
    p.add_argument("--activation", default=EPILOGUE_ACTIVATION)
    p.add_argument("--json")
    args = p.parse_args(argv)
    st = timing.Settings()
    engine = workloads.engine(0, st)
    rows = []
    for shape in EPILOGUE_SUITE:
        r = measure(shape, args.dtype, args.activation, engine)
        rows.append(r)
        m = r["median_ms"]
        print(f"{'x'.join(map(str, shape))} {args.dtype}: saved {m['saved']:.3f} ms, recompute {m['recompute']:.3f} ms "
              f"({r['recompute_vs_saved']:.3f}x), torch {m['torch']:.3f} ms ({r['torch_vs_saved']:.3f}x); "
              f"verified {r['verified']}", flush=True)
        f = r["forward_median_ms"]
        print(f"  forward: aux (y, z) {f['aux forward']:.3f} ms = {r['aux_forward_vs_fused']:.3f}x the fused "
              f"y-only {f['fused forward']:.3f} ms; the saving operator's (z, then torch's activation) "
              f"{f['saving operator forward']:.3f} ms ({r['saving_operator_vs_aux_forward']:.3f}x)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": environment.collect(0), "settings": st.as_dict(), "results": rows}, f, indent=1)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
