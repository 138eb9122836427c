#include "kernels/wkv7.h"

#include <algorithm>

#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"

namespace wick::kernels {

void wkv7_head_avx512(int N, float* S, const float* r, const float* w, const float* k,
                      const float* v, const float* kk, const float* a, float* y);
void wkv7_head_avx2(int N, float* S, const float* r, const float* w, const float* k, const float* v,
                    const float* kk, const float* a, float* y);

namespace {

// One head, one token. N is small (64 in released models); the inner loops vectorise.
inline void wkv7_head_scalar(int N, float* __restrict S, const float* __restrict r,
                             const float* __restrict w, const float* __restrict k,
                             const float* __restrict v, const float* __restrict kk,
                             const float* __restrict a, float* __restrict y) {
  float kka[256];
  float* b = N <= 256 ? kka : new float[N];
  for (int j = 0; j < N; ++j) b[j] = kk[j] * a[j];
  for (int i = 0; i < N; ++i) {
    float* Si = S + static_cast<int64_t>(i) * N;
    float sa = 0.f;
    for (int j = 0; j < N; ++j) sa += Si[j] * -kk[j];
    const float vi = v[i];
    float yi = 0.f;
    for (int j = 0; j < N; ++j) {
      const float s = Si[j] * w[j] + sa * b[j] + vi * k[j];
      Si[j] = s;
      yi += s * r[j];
    }
    y[i] = yi;
  }
  if (b != kka) delete[] b;
}

}  // namespace

Wkv7HeadFn wkv7_head_kernel(Isa isa, int N) {
  if (isa == Isa::kAvx512 && N % 16 == 0) return wkv7_head_avx512;
  // N <= 256: the AVX2 kernel once kept -kk and kk*a in 256-float buffers; the limit stays so
  // wider heads (no released model has one) keep the scalar kernel's results they always had.
  if (isa != Isa::kScalar && N % 8 == 0 && N <= 256) return wkv7_head_avx2;
  return wkv7_head_scalar;
}

const char* wkv7_head_kernel_name(Isa isa, int N) {
  const Wkv7HeadFn f = wkv7_head_kernel(isa, N);
  return f == wkv7_head_avx512 ? "avx512" : f == wkv7_head_avx2 ? "avx2" : "scalar";
}

namespace {

Wkv7HeadFn head_kernel(int N) {
  return wkv7_head_kernel(active_isa(), N);
}

}  // namespace

void wkv7_token(int H, int N, float* S, const float* r, const float* w, const float* k,
                const float* v, const float* kk, const float* a, float* y) {
  const Wkv7HeadFn head = head_kernel(N);
  for (int h = 0; h < H; ++h) {
    const int64_t o = static_cast<int64_t>(h) * N;
    head(N, S + o * N, r + o, w + o, k + o, v + o, kk + o, a + o, y + o);
  }
}

void wkv7_segments(const Wkv7Segment* segs, int64_t n, int H, int N, ThreadPool& pool) {
  const int64_t C = static_cast<int64_t>(H) * N;
  const Wkv7HeadFn head = head_kernel(N);
  auto one_head = [&](int64_t i) {
    const Wkv7Segment& s = segs[i / H];
    const int64_t o = (i % H) * N;
    for (int64_t t = 0; t < s.T; ++t) {
      const int64_t ro = t * C + o;
      head(N, s.S + o * N, s.r + ro, s.w + ro, s.k + ro, s.v + ro, s.kk + ro, s.a + ro, s.y + ro);
    }
  };
  int64_t tokens = 0;
  for (int64_t i = 0; i < n; ++i) tokens += segs[i].T;
  // Pairs are independent: in parallel once there is enough work to pay for waking a thread, in
  // blocks of neighbouring pairs of about equal work (two per thread). One block per pair, handed
  // out one at a time, put neighbouring heads on different threads, and their states (and
  // outputs) share the cache line at each boundary unless the buffers are 64-byte aligned (a
  // State's are not: std::vector): the line moved between the cores at every token. Intel Emerald
  // Rapids, 2 threads, three alternating rounds: BM_Wkv7Segments/12/64/1 (a 64-token prefill's
  // heads) 323-354 -> 196-214 us, 12/1/16 (a 16-row batched decode step) 125-128 -> 54-67 us
  // (blocks of one thread's share measured level with two per thread). The pairs' arithmetic is
  // their own: no bits change.
  if (tokens * C * N >= (int64_t{1} << 18)) {
    const int64_t pairs = n * H, blocks = std::min<int64_t>(pairs, 2 * pool.threads());
    const int64_t work = tokens * H;  // head-tokens
    // The first pair at or after `target` head-tokens of work (pairs weigh their segment's T), so
    // that the blocks carry equal work when the segments' lengths differ (a prefill beside
    // decode rows).
    const auto first_pair = [&](int64_t target) {
      int64_t before = 0;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t w = segs[s].T;
        if (before + w * H > target) return s * H + (target - before + w - 1) / w;
        before += w * H;
      }
      return pairs;
    };
    parallel_for(pool, blocks, [&](int64_t b, Arena&) {
      const int64_t i0 = b == 0 ? 0 : first_pair(b * work / blocks);
      const int64_t i1 = b + 1 == blocks ? pairs : first_pair((b + 1) * work / blocks);
      for (int64_t i = i0; i < i1; ++i) one_head(i);
    });
  } else {
    for (int64_t i = 0; i < n * H; ++i) one_head(i);
  }
}

}  // namespace wick::kernels
