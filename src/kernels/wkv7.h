// The WKV-7 recurrence (docs/x070-math.md §3.2, "WKV state update and read-out"), per head h with
// state S[h] of N x N fp32 (row = value channel i, column = key channel j):
//
//   sa[i]    = sum_j S[i,j] * (-kk[j])
//   S'[i,j]  = S[i,j] * w[j] + sa[i] * (kk[j] * a[j]) + v[i] * k[j]
//   y[i]     = sum_j S'[i,j] * r[j]
//
// w is the decay (already exp'ed, in (0,1)), kk the removal key (unit length per head), a the
// in-context learning rate, k the modified key. The sequence version runs the same per-token
// update T times, so the parallel pass and the recurrent step agree bit for bit.
#pragma once

#include <cstdint>

namespace wick::kernels {

// One token, all H heads. Vectors are length H*N; S is [H, N, N] and is updated in place.
void wkv7_token(int H, int N, float* S, const float* r, const float* w, const float* k,
                const float* v, const float* kk, const float* a, float* y);

// T tokens; each input is [T, H*N] row-major, y is [T, H*N]. Heads run in parallel (kernels/thread_pool.h).
void wkv7_sequence(int64_t T, int H, int N, float* S, const float* r, const float* w,
                   const float* k, const float* v, const float* kk, const float* a, float* y);

}  // namespace wick::kernels
