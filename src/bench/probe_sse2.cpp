// The probes' loops on 16-byte vectors (SSE2, the x86-64 baseline; no FMA): only called where the
// CPU has them (probes.cpp).
#include "probe_kernels.h"

WICK_BENCH_PROBE_TABLE(kProbeSse2, "sse2", 16)
