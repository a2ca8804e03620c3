"""The limits of splitting K, shared by every rung family that splits (core/registry.py, rung 24's
rule in core/decode.py): how many slices the workspace takes, how many a cluster holds, and which
architectures have clusters."""

MAX_SPLITK = 64                    # slices through the workspace: each adds an FP32 copy of C the reduction reads
MAX_SPLITK_CLUSTER = 8             # SKCLUSTER=1: the slices are one cluster's blocks (the portable size limit)
CLUSTER_ARCH = 90                  # thread-block clusters and distributed shared memory: sm_90 and newer
