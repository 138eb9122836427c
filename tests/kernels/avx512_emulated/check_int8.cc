// Runs the AVX-512 VNNI INT8 kernel (src/kernels/int8_matmul_avx512.cpp, compiled against SIMDe's
// emulated intrinsics by run.sh) against a plain scalar sum on random shapes and on the extreme
// codes at the column limit; prints the number of cases and exits non-zero on any difference.
// The real test (tests/kernels/test_int8_matmul.cpp) runs the kernel only on CPUs with VNNI.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/int8_matmul_impl.h"

using wick::kernels::int8_padded_cols;
using wick::kernels::Int8Matrix;

int main() {
  const auto& k = wick::kernels::int8::kernels_avx512_vnni();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(-127, 127);
  int cases = 0, bad = 0;
  for (int64_t cols : {1, 7, 31, 33, 63, 64, 65, 100, 129, 768, 1000}) {
    for (int64_t rows : {1, 3, 4, 5, 9, 67}) {
      for (int64_t nt : {1, 2, 3, 4, 5, 9}) {
        const int64_t stride = int8_padded_cols(cols);
        std::vector<int8_t> w(rows * stride, 0), x(nt * stride, 0);
        std::vector<float> scales(rows, 1.0f);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < cols; ++i) w[r * stride + i] = static_cast<int8_t>(d(rng));
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t i = 0; i < cols; ++i) x[t * stride + i] = static_cast<int8_t>(d(rng));
        const Int8Matrix m{w.data(), scales.data(), rows, cols, stride};
        for (int64_t r0 : {int64_t{0}, rows > 2 ? int64_t{1} : int64_t{0}}) {
          std::vector<int32_t> s(nt * rows);
          k.sums(m, r0, rows, x.data(), stride, nt, s.data(), rows);
          for (int64_t t = 0; t < nt; ++t)
            for (int64_t r = r0; r < rows; ++r) {
              int64_t want = 0;
              for (int64_t i = 0; i < cols; ++i)
                want += int64_t{w[r * stride + i]} * x[t * stride + i];
              if (s[t * rows + (r - r0)] != want) ++bad;
            }
          ++cases;
        }
      }
    }
  }
  // Column limit, all codes +-127.
  const int64_t cols = wick::kernels::kInt8MaxCols, stride = int8_padded_cols(cols);
  std::vector<int8_t> w(2 * stride), x(stride);
  for (int64_t i = 0; i < cols; ++i) w[i] = 127, w[stride + i] = -127, x[i] = 127;
  std::vector<float> scales(2, 1.0f);
  std::vector<int32_t> s(2);
  k.sums({w.data(), scales.data(), 2, cols, stride}, 0, 2, x.data(), stride, 1, s.data(), 2);
  const int32_t full = static_cast<int32_t>(cols * 127 * 127);
  if (s[0] != full || s[1] != -full) ++bad;
  ++cases;
  std::printf("avx512-vnni kernel (SIMDe emulation): %d cases, %d mismatches\n", cases, bad);
  return bad == 0 ? 0 : 1;
}
