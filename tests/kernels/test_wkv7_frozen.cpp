// The WKV-7 head kernel of every instruction set this CPU has produces exactly the bits it produced
// before its AVX2 and AVX-512 loops were merged into one skeleton (kernels/wkv7_impl.h): the
// states and outputs of a seeded run of tokens are hashed and compared with the hashes captured
// from the per-ISA kernels of commit 84feb20 (wkv7_avx2.cpp / wkv7_avx512.cpp as they were, one
// row at a time on AVX-512, two on AVX2). The parallel pass equals the recurrent step because both
// run this kernel; the fixture tolerances rest on its bits. Any change to a row's summation order
// (accumulators, reduction tree, chunk order, kk*a or the update's operations formed differently)
// changes the hashes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernel_test_util.h"
#include "kernels/wkv7.h"

namespace wick::kernels {
namespace {

// Inputs from raw mt19937 words (portable: no std:: distribution), in [lo, lo + span).
float uniform(std::mt19937& rng, float lo, float span) {
  return lo + span * static_cast<float>(rng() >> 8) * (1.0f / 16777216.0f);
}

// 32 tokens of head size N through `head` from a seeded state; the hash of every output and of
// the final state.
uint64_t run_hash(Wkv7HeadFn head, int N, uint32_t seed = 1000) {
  std::mt19937 rng(seed + static_cast<uint32_t>(N));
  std::vector<float> S(static_cast<size_t>(N) * N), r(N), w(N), k(N), v(N), kk(N), a(N), y(N);
  for (auto& s : S) s = uniform(rng, -0.5f, 1.0f);
  BitHash h;
  for (int t = 0; t < 32; ++t) {
    double norm = 0;
    for (int j = 0; j < N; ++j) {
      r[j] = uniform(rng, -1, 2), w[j] = uniform(rng, 0.6f, 0.4f), k[j] = uniform(rng, -0.3f, 0.6f);
      v[j] = uniform(rng, -1, 2), kk[j] = uniform(rng, -1, 2), a[j] = uniform(rng, 0, 1);
      norm += static_cast<double>(kk[j]) * kk[j];
    }
    for (int j = 0; j < N; ++j) kk[j] = static_cast<float>(kk[j] / std::sqrt(norm));
    if (t == 5) kk[3] = 0.0f;  // one zero element of the removal key (part of the frozen inputs)
    head(N, S.data(), r.data(), w.data(), k.data(), v.data(), kk.data(), a.data(), y.data());
    for (float f : y) h.add(f);
  }
  for (float f : S) h.add(f);
  return h.h;
}

struct Case {
  Isa isa;
  int N;
  uint64_t hash;
};

// Captured from the kernels of 84feb20 (before the skeleton), g++ 12 -O3, this test's inputs.
const Case kFrozen[] = {
    {Isa::kAvx2, 8, 0xc7c41284a64224e9ull},    {Isa::kAvx2, 24, 0x87ff4418c90e28a4ull},
    {Isa::kAvx2, 64, 0xff2f1653030cd626ull},   {Isa::kAvx2, 256, 0x5dc7b04e8972d269ull},
    {Isa::kAvx512, 16, 0xe36337a614358b3bull}, {Isa::kAvx512, 64, 0x5e429db9e962179cull},
    {Isa::kAvx512, 96, 0x705808f2bb0dab01ull},
};

TEST(Wkv7Frozen, EveryIsaReproducesTheBitsOfItsKernelBeforeTheSkeleton) {
  int checked = 0;
  for (const Case& c : kFrozen) {
    if (!this_cpu_has(c.isa)) continue;
    ASSERT_EQ(std::string(wkv7_head_kernel_name(c.isa, c.N)), isa_name(c.isa)) << "N=" << c.N;
    const uint64_t got = run_hash(wkv7_head_kernel(c.isa, c.N), c.N);
    EXPECT_EQ(got, c.hash) << isa_name(c.isa) << " N=" << c.N << ": got 0x" << std::hex << got;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

// Other inputs give another hash, and the scalar kernel (another summation order) another one:
// the hash sees the outputs' bits.
TEST(Wkv7Frozen, OtherInputsOrAnotherOrderGiveAnotherHash) {
  const Isa isa = best_supported_isa();
  const Wkv7HeadFn head = wkv7_head_kernel(isa, 64);
  EXPECT_NE(run_hash(head, 64), run_hash(head, 64, 2000));
  if (isa != Isa::kScalar)
    EXPECT_NE(run_hash(head, 64), run_hash(wkv7_head_kernel(Isa::kScalar, 64), 64));
}

}  // namespace
}  // namespace wick::kernels
