// The probes' loops on 32-byte vectors (-mavx2 -mfma): only called where the CPU has them
// (probes.cpp).
#include "probe_kernels.h"

WICK_BENCH_PROBE_TABLE(kProbeAvx2, "avx2", 32)
