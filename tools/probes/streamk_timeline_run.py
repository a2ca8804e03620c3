# The stream-K timeline probe, step 2 of 2 (after streamk_timeline_apply.py on a copy of the checkout): one launch
# of rung 21 at N^3 fp16 with STREAMK given, after three warm-ups and an L2 flush; one line per piece:
# "P block unit k0 k1 t_start t_mainloop_end t_fixup_end t_epilogue_end" (ns, %globaltimer_lo).
import sys, torch, gemmlab
n = int(sys.argv[1]); sk = int(sys.argv[2])
a = torch.randn(n, n, device='cuda', dtype=torch.float16); b = torch.randn(n, n, device='cuda', dtype=torch.float16)
c = torch.empty(n, n, device='cuda', dtype=torch.float16)
cfg = dict(BM=128, BN=256, BK=64, WM=64, STAGES=4, CLUSTER=2, EPI_TMA=1, GROUP=16, STREAMK=sk)
for _ in range(3):
    gemmlab.gemm(a, b, c, kernel='wgmma_ws', config=cfg)
torch.cuda.synchronize()
print("RUN", n, sk, flush=True)
x = torch.empty(1 << 28, device='cuda', dtype=torch.int8); x.zero_()   # L2 flushed like the bench
gemmlab.gemm(a, b, c, kernel='wgmma_ws', config=cfg)
torch.cuda.synchronize()
