// The WKV-7 recurrence (docs/x070-math.md §3.2, "WKV state update and read-out"), per head h with
// state S[h] of N x N fp32 (row = value channel i, column = key channel j):
//
//   sa[i]    = sum_j S[i,j] * (-kk[j])
//   S'[i,j]  = S[i,j] * w[j] + sa[i] * (kk[j] * a[j]) + v[i] * k[j]
//   y[i]     = sum_j S'[i,j] * r[j]
//
// w is the decay (already exp'ed, in (0,1)), kk the removal key (unit length per head), a the
// in-context learning rate, k the modified key. wkv7_segments runs the same per-token update over
// each segment's tokens in order, so the parallel pass and the recurrent step agree bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace wick::kernels {

// One token, all H heads. Vectors are length H*N; S is [H, N, N] and is updated in place.
void wkv7_token(int H, int N, float* S, const float* r, const float* w, const float* k,
                const float* v, const float* kk, const float* a, float* y);

class ThreadPool;

// One sequence of wkv7_segments: T tokens against its own state S [H, N, N] (updated in place);
// r .. a are [T, H*N] row-major, y is [T, H*N]. The arrays are the caller's.
struct Wkv7Segment {
  int64_t T = 0;
  float* S = nullptr;
  const float *r = nullptr, *w = nullptr, *k = nullptr, *v = nullptr, *kk = nullptr, *a = nullptr;
  float* y = nullptr;
};

// The recurrence over each of the n >= 0 segments (segs may be null when n == 0; T >= 0 each):
// a prefill's one sequence, or a batched step's rows of one token each. No two segments may share
// a state or an output, and no state or output may overlap any segment's inputs. Every (segment,
// head) pair is independent and runs wkv7_token's per-head step over its tokens in order, so the
// results are bit for bit those of wkv7_token called token by token, whichever segments share a
// call; the pairs run in parallel on `pool` once all the segments together hold enough work
// (batched decode: many segments of one token, each too small alone). Call it from outside the
// pool's blocks (kernels/thread_pool.h). Throws nothing of its own.
void wkv7_segments(const Wkv7Segment* segs, int64_t n, int H, int N, ThreadPool& pool);

// One head (S [N, N], vectors of length N), one token: the kernel `isa` uses for head size N -
// AVX-512 for N % 16 == 0, AVX2 for N % 8 == 0 and N <= 256, else the scalar loop. The passes
// above call wkv7_head_kernel(active_isa(), N); tests compare the instruction sets.
using Wkv7HeadFn = void (*)(int N, float* S, const float* r, const float* w, const float* k,
                            const float* v, const float* kk, const float* a, float* y);
Wkv7HeadFn wkv7_head_kernel(Isa isa, int N);
// "scalar", "avx2" or "avx512": the build wkv7_head_kernel(isa, N) picks.
const char* wkv7_head_kernel_name(Isa isa, int N);

}  // namespace wick::kernels
