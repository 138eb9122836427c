// The probes' loops on 64-byte vectors (-mavx512f -mfma): only called where the CPU has them
// (probes.cpp).
#include "probe_kernels.h"

WICK_BENCH_PROBE_TABLE(kProbeAvx512, "avx512", 64)
