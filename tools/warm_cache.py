"""Compile every rung variant (dtypes x A/B layouts x vector flags) for one architecture into the
disk cache, in parallel. Used on the device machine before the GPU tests, so the tests time
kernels and not NVRTC. Usage: python tools/warm_cache.py [sm_90a] [processes]"""

import itertools
import sys
from concurrent.futures import ProcessPoolExecutor

from gemmlab import kernels
from gemmlab.core.variant import Variant


def build(job):
    slug, dtype, a_col, b_col, va, vb, vc, arch = job
    Variant.make(slug, dtype, a_col=a_col, b_col=b_col, vec_a=va, vec_b=vb, vec_c=vc).compile(arch)
    return slug


if __name__ == "__main__":
    arch = sys.argv[1] if len(sys.argv) > 1 else "sm_90a"
    procs = int(sys.argv[2]) if len(sys.argv) > 2 else None
    jobs = [(r.slug, dt, *flags, arch) for r in kernels() for dt in r.dtypes
            for flags in itertools.product((False, True), repeat=5)]
    with ProcessPoolExecutor(procs) as ex:
        done = list(ex.map(build, jobs, chunksize=4))
    print(f"compiled {len(done)} variants for {arch}")
