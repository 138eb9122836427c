// The dense dot / GEMV / GEMM-tile kernels of every instruction set this CPU has produce exactly
// the bits they produced before their loop structure was merged into one skeleton
// (kernels/dot_impl.h): each kernel's outputs on seeded inputs are hashed and compared with the
// hashes captured from the per-ISA kernels of commit b7de0b3 (dot_avx2.cpp / dot_avx512.cpp /
// dot_scalar.cpp as they were). The parity tests and the fixture tolerances rest on these bits;
// a change to an ISA's summation order (accumulator count, tail handling, reduction tree) changes
// its hashes: the inputs span 2^-12 .. 2^12 with random signs, so almost every reordering of a
// sum rounds differently somewhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernel_test_util.h"

namespace wick::kernels {
namespace {

// Inputs from raw mt19937 words (portable: no std:: distribution, whose output is unspecified).
float random_float(std::mt19937& rng) {
  const uint32_t a = rng(), b = rng();
  const uint32_t sign = a & 0x80000000u;
  const uint32_t exp = 127 - 12 + (b % 25);  // 2^-12 .. 2^12
  const uint32_t u = sign | (exp << 23) | (a & 0x7fffffu);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t random_f16(std::mt19937& rng) {  // finite fp16, subnormals included
  const uint32_t a = rng();
  const uint32_t exp = (a >> 10) % 31;  // 0 .. 30
  return static_cast<uint16_t>((a & 0x8000u) | (exp << 10) | (a & 0x3ffu));
}
uint16_t random_bf16(std::mt19937& rng) {
  const float f = random_float(rng);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

enum Kind { kDotF32, kDotF16, kDotBf16, kGemvF32, kGemvF16, kGemvBf16, kGemmTile, kKinds };
const char* const kKindNames[kKinds] = {"dot_f32",   "dot_f16",   "dot_bf16", "gemv_f32",
                                        "gemv_f16",  "gemv_bf16", "gemm_tile"};

// One hash per kernel of `k` over: lengths 1 .. 40 and a few long ones (every tail length of
// both vector widths), row strides n and n + 5, 19 rows (groups of 8 and every remainder of the
// GEMV), 7 inputs, every GEMM tile shape up to the kernel's register blocking.
std::vector<uint64_t> kernel_hashes(const DotKernels& k) {
  std::vector<BitHash> hs(kKinds);
  std::mt19937 rng(20);
  std::vector<size_t> lengths;
  for (size_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (size_t n : {63u, 64u, 65u, 100u, 129u, 768u, 1000u, 3072u}) lengths.push_back(n);
  constexpr int kRows = 19, kInputs = 7;
  for (size_t n : lengths) {
    for (size_t stride : {n, n + 5}) {
      std::vector<float> w(kRows * stride), x(kInputs * n);
      std::vector<uint16_t> wh(w.size()), wb(w.size());
      for (auto& v : w) v = random_float(rng);
      for (auto& v : wh) v = random_f16(rng);
      for (auto& v : wb) v = random_bf16(rng);
      for (auto& v : x) v = random_float(rng);
      for (int t = 0; t < kInputs; ++t) {
        const float* xt = x.data() + t * n;
        for (int r = 0; r < kRows; ++r) {
          hs[kDotF32].add(k.f32(w.data() + r * stride, xt, n));
          hs[kDotF16].add(k.f16(wh.data() + r * stride, xt, n));
          hs[kDotBf16].add(k.bf16(wb.data() + r * stride, xt, n));
        }
        // Every row count the GEMV may be called with, from every row offset 0 / 3.
        for (int r0 : {0, 3}) {
          for (int nr = 1; nr + r0 <= kRows; ++nr) {
            std::vector<float> y(nr);
            k.gemv_f32(w.data() + r0 * stride, stride, xt, n, nr, y.data());
            for (float v : y) hs[kGemvF32].add(v);
            k.gemv_f16(wh.data() + r0 * stride, stride, xt, n, nr, y.data());
            for (float v : y) hs[kGemvF16].add(v);
            k.gemv_bf16(wb.data() + r0 * stride, stride, xt, n, nr, y.data());
            for (float v : y) hs[kGemvBf16].add(v);
          }
        }
      }
      for (int tr = 1; tr <= k.tile_rows; ++tr) {
        for (int ti = 1; ti <= k.tile_inputs; ++ti) {
          std::vector<float> y(ti * tr);
          k.gemm_tile(w.data(), stride, x.data(), n, n, tr, ti, y.data(), tr, nullptr);
          for (float v : y) hs[kGemmTile].add(v);
        }
      }
    }
  }
  std::vector<uint64_t> out;
  for (const BitHash& h : hs) out.push_back(h.h);
  return out;
}

// Captured from the kernels of b7de0b3 (before the skeleton), g++ 12 -O3, this test's inputs.
const uint64_t kFrozen[3][kKinds] = {
    // scalar
    {0x2f52f78d20d783baull, 0x3faf44ebbc548044ull, 0xe621ff2003e555c0ull, 0x9896939d86bf8bb5ull,
     0xbe54605bb3cae0c1ull, 0xb528c9cf8f351b5full, 0x94859b4223c81e5full},
    // avx2
    {0x622296c231b48434ull, 0x43f826117dfa482dull, 0xcaa3d42c9893f8cbull, 0x7387aab5769d5e87ull,
     0xaf66f01db309884ull, 0x4ba5f54572569b66ull, 0x3b2b62dfd3a7176bull},
    // avx512
    {0x5fa7dd31ea0142a8ull, 0x5e6398715ea7ab87ull, 0x2cb49547511e18c7ull, 0x54254d367f946a13ull,
     0xf5f2ccec1011a65eull, 0xd7a9d2327e7d0d9aull, 0xd7d830ce0deaff69ull},
};

TEST(DotFrozen, EveryIsaReproducesTheBitsOfItsKernelsBeforeTheSkeleton) {
  int checked = 0;
  for (Isa isa : isas_of_this_cpu()) {
    const std::vector<uint64_t> got = kernel_hashes(dot_kernels_for(isa));
    for (int kind = 0; kind < kKinds; ++kind) {
      EXPECT_EQ(got[kind], kFrozen[static_cast<int>(isa)][kind])
          << isa_name(isa) << " " << kKindNames[kind] << ": got 0x" << std::hex << got[kind];
    }
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

// The GEMV's outputs for rows r0 .. r0 + nr do not depend on nr or r0 (a row's sum is a function
// of the row and the input alone), for every ISA and dtype.
TEST(DotFrozen, GemvRowsDoNotDependOnTheirGroupOrPosition) {
  std::mt19937 rng(21);
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    for (size_t n : {1u, 9u, 16u, 47u, 768u}) {
      constexpr int kRows = 37;
      std::vector<float> w(kRows * n), x(n);
      std::vector<uint16_t> wh(w.size());
      for (auto& v : w) v = random_float(rng);
      for (auto& v : wh) v = random_f16(rng);
      for (auto& v : x) v = random_float(rng);
      std::vector<float> all(kRows), allh(kRows);
      k.gemv_f32(w.data(), n, x.data(), n, kRows, all.data());
      k.gemv_f16(wh.data(), n, x.data(), n, kRows, allh.data());
      for (int r0 = 0; r0 < kRows; r0 += 5) {
        for (int nr = 1; r0 + nr <= kRows; nr += 3) {
          std::vector<float> y(nr);
          k.gemv_f32(w.data() + r0 * n, n, x.data(), n, nr, y.data());
          for (int r = 0; r < nr; ++r)
            ASSERT_EQ(std::memcmp(&y[r], &all[r0 + r], 4), 0) << isa_name(isa) << " n=" << n;
          k.gemv_f16(wh.data() + r0 * n, n, x.data(), n, nr, y.data());
          for (int r = 0; r < nr; ++r)
            ASSERT_EQ(std::memcmp(&y[r], &allh[r0 + r], 4), 0) << isa_name(isa) << " n=" << n;
        }
      }
    }
  }
}

// The GEMM tile accepts any nr x nt (dot.h), beyond its register blocking, and each output is
// the dot of its row and input.
TEST(DotFrozen, GemmTileOfAnySizeEqualsTheDot) {
  std::mt19937 rng(22);
  for (Isa isa : isas_of_this_cpu()) {
    const DotKernels& k = dot_kernels_for(isa);
    for (size_t n : {5u, 16u, 37u}) {
      constexpr int kRows = 11, kInputs = 13;
      std::vector<float> w(kRows * n), x(kInputs * n);
      for (auto& v : w) v = random_float(rng);
      for (auto& v : x) v = random_float(rng);
      for (int nr : {1, k.tile_rows, k.tile_rows + 1, kRows}) {
        for (int nt : {1, k.tile_inputs, k.tile_inputs + 1, kInputs}) {
          std::vector<float> y(kInputs * kRows, -1.0f);
          // Half the shapes with a prefetch target (the first rows: nr rows must follow it, dot.h),
          // which must change nothing.
          const void* next = (nr + nt) % 2 ? w.data() : nullptr;
          k.gemm_tile(w.data(), n, x.data(), n, n, nr, nt, y.data(), kRows, next);
          for (int t = 0; t < kInputs; ++t) {
            for (int r = 0; r < kRows; ++r) {
              const float want = r < nr && t < nt ? k.f32(w.data() + r * n, x.data() + t * n, n)
                                                  : -1.0f;  // untouched
              ASSERT_EQ(std::memcmp(&y[t * kRows + r], &want, 4), 0)
                  << isa_name(isa) << " n=" << n << " tile " << nr << "x" << nt << " (" << r
                  << ", " << t << ")";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace wick::kernels
