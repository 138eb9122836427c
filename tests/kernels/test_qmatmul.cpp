// Quantised matrix kernels (kernels/qmatmul.h) against the exact dequantiser (quant/dequant.h)
// and the spec's worked examples (docs/rwkvq-format.md §2.2, §2.3), for every instruction set
// this CPU runs: random packed matrices (subnormal and zero superblock scales included) in every
// layout and bit width, several superblocks per row, batches of 1 .. 37 inputs and one-hot inputs
// that must reproduce the dequantised weights exactly; every decoder gives the dequantiser's
// floats bit for bit and every product equals the dense fp32 dot kernel of the same instruction
// set over those floats; and the determinism contract: a row of a batch equals the single-input
// product bit for bit, with 1 or 2 threads. Then the integer products of inputs rounded to 8 bits
// (qmatmul_int8_inputs): every instruction set gives the scalar reference's bits, which follow the
// documented sequence, close to the dequantised rows times the rounded inputs in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "test_util.h"
#include "base/fp16.h"
#include "io/tensor_set.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/int8_inputs.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/qmatmul.h"
#include "kernels/qmatmul_impl.h"
#include "kernels/thread_pool.h"
#include "quant/dequant.h"
#include "quant/rwkvq.h"

namespace wick::kernels {
namespace {

using test::set_test_threads;
using test::test_pool;

// A packed matrix in either layout: the byte buffers, the views the oracle reads them through and
// the kernel's matrix struct. Not movable (the views point into the buffers).
struct Packed {
  bool sym = false;
  int bits = 0;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes_packed, qh, qh2, qsqm, d, dm, codes, qs;
  std::vector<uint16_t> sb6_sm;  // sb6: the scales the SIMD kernels read
  std::vector<uint8_t> hb;       // sb6 at 5-6 bits, sym@6: the high bits the SIMD integer GEMVs read
  std::vector<io::TensorView> views;
  quant::QuantTensor qt;
  Sb6Matrix sb6;
  SymMatrix symm;

  Packed() = default;
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;

  std::string name() const {
    return std::string(sym ? "sym@" : "sb6@") + std::to_string(bits) + " " + std::to_string(rows) +
           "x" + std::to_string(cols);
  }

  void qmatmul(Isa isa, const float* x, int64_t T, float* y) const {
    if (sym) {
      qmat::qmatmul_isa(isa, symm, x, T, y, test_pool());
    } else {
      qmat::qmatmul_isa(isa, sb6, x, T, y, test_pool());
    }
  }

  // Builds the views and structs once the buffers are filled.
  void finish() {
    views.reserve(8);
    auto view = [&](std::vector<uint8_t>& buf) -> const io::TensorView* {
      if (buf.empty()) return nullptr;
      io::TensorView v;
      v.dtype = DType::U8;
      v.shape = {static_cast<int64_t>(buf.size())};
      v.data = buf.data();
      v.nbytes = buf.size();
      views.push_back(std::move(v));
      return &views.back();
    };
    qt.key = "test";
    qt.shape = {rows, cols};
    qt.bits = bits;
    if (sym) {
      qt.layout = quant::Layout::kSym;
      qt.gs = 16;
      qt.sb = 16;
      qt.n_blocks = cols / 16;
      qt.codes = view(codes);
      qt.codes_packed = view(codes_packed);
      qt.gw_qh = view(qh);
      qt.gw_qh2 = view(qh2);
      qt.gw_qs = view(qs);
      qt.gw_d = view(d);
      symm.codes = codes.empty() ? nullptr : reinterpret_cast<const int8_t*>(codes.data());
      symm.codes_packed = codes_packed.empty() ? nullptr : codes_packed.data();
      symm.qh = qh.empty() ? nullptr : qh.data();
      symm.qh2 = qh2.empty() ? nullptr : qh2.data();
      symm.qs = reinterpret_cast<const int8_t*>(qs.data());
      symm.d = d.data();
      symm.rows = rows;
      symm.cols = cols;
      symm.bits = bits;
      unpack();
    } else {
      qt.layout = quant::Layout::kSb6;
      qt.gs = 32;
      qt.sb = 8;
      qt.n_blocks = cols / 32;
      qt.codes_packed = view(codes_packed);
      qt.gw_qh = view(qh);
      qt.gw_qh2 = view(qh2);
      qt.gw_qsqm = view(qsqm);
      qt.gw_d = view(d);
      qt.gw_dm = view(dm);
      sb6.codes_packed = codes_packed.data();
      sb6.qh = qh.empty() ? nullptr : qh.data();
      sb6.qh2 = qh2.empty() ? nullptr : qh2.data();
      sb6.qsqm = qsqm.data();
      sb6.d = d.data();
      sb6.dm = dm.data();
      sb6.rows = rows;
      sb6.cols = cols;
      sb6.bits = bits;
      unpack();
    }
  }

  // The kernels' copies beside the file's arrays: the sb6 scales (Sb6Matrix::sm) and the
  // rearranged planes (Sb6Matrix::hb at 5-6 bits, SymMatrix::hb at sym@6; made whatever the
  // active ISA reads, for the kernels of every instruction set), again after the scales or
  // planes change.
  void unpack() {
    if (sym) {
      hb = bits == 6 ? wick::kernels::repack_sym6_high_bits(symm) : std::vector<uint8_t>{};
      symm.hb = hb.empty() ? nullptr : hb.data();
      return;
    }
    sb6_sm = wick::kernels::unpack_sb6_scales(sb6);
    sb6.sm = sb6_sm.data();
    hb = bits >= 5 ? wick::kernels::repack_sb6_high_bits(sb6) : std::vector<uint8_t>{};
    sb6.hb = hb.empty() ? nullptr : hb.data();
  }

  std::vector<float> dequantized() const { return quant::dequantize(qt); }
};

void put_f16(std::vector<uint8_t>& buf, size_t i, uint16_t h) {
  std::memcpy(&buf[2 * i], &h, 2);
}
// The i-th fp16 of buf, widened.
float get_f16(const std::vector<uint8_t>& buf, int64_t i) {
  uint16_t h;
  std::memcpy(&h, &buf[2 * i], 2);
  return base::f16_to_f32(h);
}
// The k-th 6-bit field (k < 16: qs 0..7, then qm + 31) of superblock sb's 12 bytes of qsqm.
int six_bits(const std::vector<uint8_t>& qsqm, int64_t sb, int k) {
  const uint8_t* q = &qsqm[12 * sb + 3 * (k / 4)];
  const uint32_t v = q[0] | q[1] << 8 | static_cast<uint32_t>(q[2]) << 16;
  return static_cast<int>((v >> (6 * (k % 4))) & 63);
}

// Four 6-bit values into 3 bytes, LSB first (§2.1).
void pack6(const int* v, uint8_t* out) {
  const uint32_t w = v[0] | v[1] << 6 | v[2] << 12 | static_cast<uint32_t>(v[3]) << 18;
  out[0] = w & 0xff;
  out[1] = (w >> 8) & 0xff;
  out[2] = (w >> 16) & 0xff;
}

// A superblock scale: mostly normal fp16 values of typical size, often subnormal, sometimes zero
// (the degenerate blocks of the spec) unless `nonzero`.
uint16_t random_scale(std::mt19937& rng, uint16_t normal_lo, uint16_t normal_hi, bool nonzero) {
  const int kind = static_cast<int>(rng() % 8);
  if (kind == 0 && !nonzero) return 0;
  if (kind <= 3) return static_cast<uint16_t>(1 + rng() % 0x3ff);  // subnormal
  return static_cast<uint16_t>(normal_lo + rng() % (normal_hi - normal_lo));
}

std::unique_ptr<Packed> random_sb6(int bits, int64_t rows, int64_t cols, uint32_t seed,
                                   bool nonzero_scales = false) {
  auto p = std::make_unique<Packed>();
  p->bits = bits;
  p->rows = rows;
  p->cols = cols;
  std::mt19937 rng(seed);
  auto bytes = [&](std::vector<uint8_t>& v, size_t n) {
    v.resize(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
  };
  bytes(p->codes_packed, rows * cols / 2);
  if (bits >= 5) bytes(p->qh, rows * cols / 8);
  if (bits >= 6) bytes(p->qh2, rows * cols / 8);
  const int64_t nsb = rows * (cols / 256);
  p->qsqm.resize(nsb * 12);
  p->d.resize(nsb * 2);
  p->dm.resize(nsb * 2);
  for (int64_t j = 0; j < nsb; ++j) {
    int qs[8], qm[8];
    for (int i = 0; i < 8; ++i) {
      qs[i] = 1 + static_cast<int>(rng() % 63);  // 1..63
      qm[i] = static_cast<int>(rng() % 63);      // stored qm + 31: 0..62
    }
    pack6(qs, &p->qsqm[12 * j]);
    pack6(qs + 4, &p->qsqm[12 * j + 3]);
    pack6(qm, &p->qsqm[12 * j + 6]);
    pack6(qm + 4, &p->qsqm[12 * j + 9]);
    // d ~ max/qs range, dm ~ min/qm range: 6e-5 .. 1e-2 when normal.
    put_f16(p->d, j, random_scale(rng, 0x0400, 0x2000, nonzero_scales));
    put_f16(p->dm, j, random_scale(rng, 0x0400, 0x2000, nonzero_scales));
  }
  p->finish();
  return p;
}

std::unique_ptr<Packed> random_sym(int bits, int64_t rows, int64_t cols, uint32_t seed) {
  auto p = std::make_unique<Packed>();
  p->sym = true;
  p->bits = bits;
  p->rows = rows;
  p->cols = cols;
  std::mt19937 rng(seed);
  auto bytes = [&](std::vector<uint8_t>& v, size_t n) {
    v.resize(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
  };
  if (bits == 8) {
    bytes(p->codes, rows * cols);
  } else {
    bytes(p->codes_packed, rows * cols / 2);
    bytes(p->qh, rows * cols / 8);
    bytes(p->qh2, rows * cols / 8);
  }
  bytes(p->qs, rows * cols / 16);  // -128 .. 127
  const int64_t nsb = rows * (cols / 256);
  p->d.resize(nsb * 2);
  // Real sym d ~ max|w| / 127^2 is mostly subnormal; normal values up to ~2e-3.
  for (int64_t j = 0; j < nsb; ++j) put_f16(p->d, j, random_scale(rng, 0x0400, 0x1800, true));
  p->finish();
  return p;
}

std::vector<std::unique_ptr<Packed>> all_layouts(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<std::unique_ptr<Packed>> out;
  for (int bits : {4, 5, 6}) out.push_back(random_sb6(bits, rows, cols, seed + bits));
  for (int bits : {6, 8}) out.push_back(random_sym(bits, rows, cols, seed + 10 + bits));
  return out;
}

std::vector<float> random_inputs(int64_t n, uint32_t seed) {
  return test::random_normal(static_cast<size_t>(n), seed);
}

// |got - float64(W) @ x| <= 1e-5 * sum |W x| (+ a floor far below any weight x input here).
void expect_close_to_oracle(const Packed& p, const std::vector<float>& w, const float* x, int64_t T,
                            const float* y, const std::string& what) {
  int failures = 0;
  for (int64_t t = 0; t < T && failures < 5; ++t)
    for (int64_t o = 0; o < p.rows && failures < 5; ++o) {
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < p.cols; ++i) {
        const double v = double(w[o * p.cols + i]) * double(x[t * p.cols + i]);
        ref += v;
        mag += std::abs(v);
      }
      const double got = y[t * p.rows + o];
      if (!(std::abs(got - ref) <= 1e-5 * mag + 1e-30)) {
        ++failures;
        ADD_FAILURE() << what << " t=" << t << " o=" << o << ": got " << got << " want " << ref
                      << " (|W x| sum " << mag << ")";
      }
    }
}

TEST(Qmatmul, EveryIsaAgreesWithTheDequantisedMatrixInDouble) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{70, 512}, {33, 768}}) {
    for (const auto& p : all_layouts(rows, cols, 100 + static_cast<uint32_t>(cols))) {
      const std::vector<float> w = p->dequantized();
      for (int64_t T : {1, 3, 4, 5, 37}) {
        const std::vector<float> x = random_inputs(T * cols, static_cast<uint32_t>(T));
        std::vector<float> scalar(T * rows);
        p->qmatmul(Isa::kScalar, x.data(), T, scalar.data());
        for (Isa isa : isas_of_this_cpu()) {
          std::vector<float> y(T * rows);
          p->qmatmul(isa, x.data(), T, y.data());
          const std::string what =
              p->name() + " " + std::string(isa_name(isa)) + " T=" + std::to_string(T);
          expect_close_to_oracle(*p, w, x.data(), T, y.data(), what);
          // Against the scalar kernel, with the same tolerance.
          for (int64_t t = 0; t < T; ++t)
            for (int64_t o = 0; o < rows; ++o) {
              double mag = 0;
              for (int64_t i = 0; i < cols; ++i)
                mag += std::abs(double(w[o * cols + i]) * x[t * cols + i]);
              ASSERT_LE(std::abs(double(y[t * rows + o]) - scalar[t * rows + o]),
                        1e-5 * mag + 1e-30)
                  << what << " vs scalar, t=" << t << " o=" << o;
            }
        }
      }
    }
  }
}

// Every decoder writes exactly the floats of the dequantiser (quant/dequant.h, itself checked
// against rwkv-quant's hashes), degenerate scales (zero, subnormal: the 1e-8 floor) included, for
// a whole matrix, for a range of rows starting inside it and for ranges of columns (whole
// superblocks: the first, a middle one, the last two).
TEST(Qmatmul, EveryIsaDecodesTheDequantisersFloats) {
  const int64_t rows = 21, cols = 1024;
  for (const auto& p : all_layouts(rows, cols, 500)) {
    const std::vector<float> w = p->dequantized();
    for (Isa isa : isas_of_this_cpu()) {
      const qmat::Kernels& k = qmat::kernels_for(isa);
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {5, 12}})
        for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, cols}, {0, 256}, {256, 512}, {512, cols}}) {
          const int64_t width = c1 - c0;
          std::vector<float> got((r1 - r0) * width, -1.0f);
          if (p->sym) {
            k.decode_sym(p->symm, r0, r1, c0, c1, got.data());
          } else {
            k.decode_sb6(p->sb6, r0, r1, c0, c1, got.data());
          }
          for (int64_t r = r0; r < r1; ++r)
            ASSERT_EQ(std::memcmp(got.data() + (r - r0) * width, w.data() + r * cols + c0,
                                  static_cast<size_t>(width) * sizeof(float)),
                      0)
                << p->name() << " " << isa_name(isa) << " row " << r << " columns " << c0 << ".."
                << c1;
        }
    }
  }
}

// Blocks at the 1e-8 floor of s_b (d zero or negative) with offsets m_b of every size: q * 1e-8
// rounds, so the decoders must multiply, then add there, as the dequantiser does (a fused
// multiply-add gives other floats for some codes); and a NaN d decodes to NaN weights as the
// dequantiser's std::max leaves it (not to the floor, as a vector max with the operands the other
// way round would).
TEST(Qmatmul, EveryIsaDecodesFloorScaleBlocksAsTheDequantiser) {
  const int64_t rows = 16, cols = 512;
  for (int bits : {4, 5, 6}) {
    auto p = random_sb6(bits, rows, cols, 60 + bits, true);
    std::mt19937 rng(bits);
    for (int64_t j = 0; j < rows * (cols / 256); ++j) {
      // s_b = 1e-8 from d = +0, -0 or a negative d; one superblock with a NaN d (s_b NaN).
      const uint16_t d[] = {0x0000, 0x8000, 0x8400, 0xa000};
      put_f16(p->d, j, j == 5 ? 0x7e00 : d[j % 4]);
      put_f16(p->dm, j, static_cast<uint16_t>(1 + rng() % 0x1400));  // subnormal .. 1e-3
    }
    p->unpack();
    const std::vector<float> w = p->dequantized();
    for (Isa isa : isas_of_this_cpu()) {
      std::vector<float> got(rows * cols);
      qmat::kernels_for(isa).decode_sb6(p->sb6, 0, rows, 0, cols, got.data());
      ASSERT_EQ(std::memcmp(got.data(), w.data(), got.size() * sizeof(float)), 0)
          << p->name() << " " << isa_name(isa);
    }
  }
}

// The scales the SIMD kernels read (Sb6Matrix::sm, unpack_sb6_scales): per superblock the fp16 of
// qs_i * d (before the floor) then of (qm_i - 31) * dm, from the test's own reading of the fields,
// zero, negative, NaN and subnormal superblock scales included, by every instruction set; another
// field, another value.
TEST(Qmatmul, UnpackedSb6ScalesAreTheHalvesOfTheFields) {
  const int64_t rows = 11, cols = 512, nsb = cols / 256;
  auto p = random_sb6(5, rows, cols, 77, true);
  // Zeros, a negative, a quiet NaN, a subnormal, normals whose products round (0x3555) or
  // overflow (0x7bff), NaNs with a payload, signalling, negative.
  const uint16_t d[] = {0x0000, 0x8000, 0x8400, 0x7e00, 0x0003, 0x2c00,
                        0x3555, 0x7bff, 0x7e55, 0x7c01, 0xfe00};
  for (int64_t j = 0; j < rows * nsb; ++j) {
    put_f16(p->d, j, d[j % 11]);
    put_f16(p->dm, j, d[(j + 3) % 11]);
  }
  p->unpack();
  ASSERT_EQ(p->sb6_sm.size(), static_cast<size_t>(rows * nsb * 16));
  for (int64_t sb = 0; sb < rows * nsb; ++sb)
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(p->sb6_sm[16 * sb + i],
                base::f32_to_f16(static_cast<float>(six_bits(p->qsqm, sb, i)) * get_f16(p->d, sb)))
          << "superblock " << sb << " s_" << i;
      EXPECT_EQ(p->sb6_sm[16 * sb + 8 + i],
                base::f32_to_f16(static_cast<float>(six_bits(p->qsqm, sb, 8 + i) - 31) *
                                 get_f16(p->dm, sb)))
          << "superblock " << sb << " m_" << i;
    }
  // Every instruction set's unpacker, whole and from row 2 on.
  for (Isa isa : isas_of_this_cpu()) {
    std::vector<uint16_t> all(p->sb6_sm.size()), tail(p->sb6_sm.size() - 2 * nsb * 16);
    qmat::kernels_for(isa).unpack_sb6_scales(p->sb6, 0, rows, all.data());
    qmat::kernels_for(isa).unpack_sb6_scales(p->sb6, 2, rows, tail.data());
    EXPECT_EQ(all, p->sb6_sm) << isa_name(isa);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), p->sb6_sm.begin() + 2 * nsb * 16)) << isa_name(isa);
  }
  const std::vector<uint16_t> before = p->sb6_sm;
  p->qsqm[12 * 3 + 7] ^= 0x10;  // a bit of qm_2 of superblock 3 (dm = 0x3555)
  p->qsqm[12 * 2 + 1] ^= 0x04;  // a bit of qs_1 of superblock 2 (d = 0x8400)
  p->unpack();
  EXPECT_NE(p->sb6_sm, before);
}

// The rearranged planes of kernels/qmatmul.h (repack_sb6_high_bits, repack_sym6_high_bits) from
// the test's own reading of the planes: column(j, v, i) is the column of byte i of code vector v of
// superblock j; at 5 bits its qh bit is bit v of byte i, at 6 bits its qh and qh2 bits the crumb
// at bits 2 (v % 4) of byte 32 (v / 4) + i.
template <class Column>
std::vector<uint8_t> expected_high_bits(const Packed& p, Column column) {
  const int64_t nsb = p.cols / 256, per = 32 * (p.bits - 4);
  const auto bit = [&](const std::vector<uint8_t>& plane, int64_t r, int64_t c) {
    return (plane[r * p.cols / 8 + c / 8] >> (c % 8)) & 1;
  };
  std::vector<uint8_t> want(p.rows * nsb * per, 0);
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t j = 0; j < nsb; ++j)
      for (int v = 0; v < 8; ++v)
        for (int i = 0; i < 32; ++i) {
          const int64_t c = column(j, v, i), at = (r * nsb + j) * per;
          if (p.bits == 5) {
            want[at + i] |= static_cast<uint8_t>(bit(p.qh, r, c) << v);
          } else {
            want[at + 32 * (v / 4) + i] |=
                static_cast<uint8_t>((bit(p.qh, r, c) | bit(p.qh2, r, c) << 1) << 2 * (v % 4));
          }
        }
  return want;
}

// Every instruction set's repacker (repack(kernels, r0, out): rows [r0, rows) into out) gives
// `want`, whole and from row 1 on.
template <class Repack>
void expect_every_repacker(const std::vector<uint8_t>& want, int64_t rows, Repack repack) {
  const size_t per_row = want.size() / static_cast<size_t>(rows);
  for (Isa isa : isas_of_this_cpu()) {
    std::vector<uint8_t> all(want.size(), 0xa5), tail(want.size() - per_row, 0xa5);
    repack(qmat::kernels_for(isa), 0, all.data());
    repack(qmat::kernels_for(isa), 1, tail.data());
    EXPECT_EQ(all, want) << isa_name(isa);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), want.begin() + per_row)) << isa_name(isa);
  }
}

// Bits that differ between a and b.
int bits_moved(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += __builtin_popcount(a[i] ^ b[i]);
  return n;
}

// attach_int8_high_bits on a copy of view m whose hb points elsewhere: it returns int8_high_bits(m)
// and points the copy's hb at that array, or clears it where the array is empty.
template <class M>
void expect_attached(const M& m) {
  M v = m;
  const uint8_t stale = 0;
  v.hb = &stale;
  const std::vector<uint8_t> hb = kernels::attach_int8_high_bits(v);
  EXPECT_EQ(hb, kernels::int8_high_bits(m));
  EXPECT_EQ(v.hb, hb.empty() ? nullptr : hb.data());
}

// sb6 (Sb6Matrix::hb): byte i of code vector v = 2p + half is column 16 half + i % 16 of block
// 2p + i / 16; the bytes equal the planes read here, from every instruction set's repacker; one
// flipped plane bit (qh at 5 bits, qh2 at 6) moves one bit of hb. Whether the active integer GEMV
// reads it: sb6_reads_high_bits().
TEST(Qmatmul, RepackedHighBitsAreThePlaneBitsOfEachCodeByte) {
  const int64_t rows = 3, cols = 512;
  for (int bits : {5, 6}) {
    SCOPED_TRACE(bits);
    auto p = random_sb6(bits, rows, cols, 91);
    const std::vector<uint8_t> want = expected_high_bits(*p, [](int64_t j, int v, int i) {
      return 256 * j + 32 * (2 * (v / 2) + i / 16) + 16 * (v % 2) + i % 16;
    });
    EXPECT_EQ(p->hb, want);
    expect_every_repacker(want, rows, [&](const qmat::Kernels& k, int64_t r0, uint8_t* out) {
      k.repack_sb6_high_bits(p->sb6, r0, rows, out);
    });
    const std::vector<uint8_t> before = p->hb;
    (bits == 5 ? p->qh : p->qh2)[cols / 8 + 37] ^= 0x20;  // row 1, column 301
    p->unpack();
    EXPECT_EQ(bits_moved(p->hb, before), 1);
  }
  EXPECT_EQ(kernels::sb6_reads_high_bits(), std::string(kernel_table().packed_int8->name) == "avx2");
  auto p4 = random_sb6(4, 2, 256, 5);
  EXPECT_TRUE(p4->hb.empty());
  EXPECT_EQ(p4->sb6.hb, nullptr);
  // int8_high_bits: the repacked planes exactly where the active GEMV reads them, else nothing.
  EXPECT_TRUE(kernels::int8_high_bits(p4->sb6).empty());
  for (int bits : {5, 6}) {
    auto p = random_sb6(bits, rows, cols, 93);
    EXPECT_EQ(kernels::int8_high_bits(p->sb6),
              kernels::sb6_reads_high_bits() ? p->hb : std::vector<uint8_t>{});
    expect_attached(p->sb6);
  }
  expect_attached(p4->sb6);
}

// sym@6 (SymMatrix::hb): byte i of code vector v = 2g + half is column 64g + 16 (i / 8) + 8 half
// + i % 8 (the nibble layout's order); as above, one flipped qh2 bit moving one bit.
TEST(Qmatmul, RepackedSym6HighBitsAreThePlaneBitsOfEachCodeByte) {
  const int64_t rows = 3, cols = 512;
  auto p = random_sym(6, rows, cols, 92);
  const std::vector<uint8_t> want = expected_high_bits(*p, [](int64_t j, int v, int i) {
    return 256 * j + 64 * (v / 2) + 16 * (i / 8) + 8 * (v % 2) + i % 8;
  });
  EXPECT_EQ(p->hb, want);
  expect_every_repacker(want, rows, [&](const qmat::Kernels& k, int64_t r0, uint8_t* out) {
    k.repack_sym6_high_bits(p->symm, r0, rows, out);
  });
  const std::vector<uint8_t> before = p->hb;
  p->qh2[2 * cols / 8 + 45] ^= 0x04;  // row 2, column 362
  p->unpack();
  EXPECT_EQ(bits_moved(p->hb, before), 1);
  EXPECT_EQ(kernels::sym6_reads_high_bits(),
            std::string(kernel_table().packed_int8->name) != "scalar");
  // int8_high_bits: the repacked planes exactly where the active GEMV reads them (sym@6 only).
  EXPECT_EQ(kernels::int8_high_bits(p->symm),
            kernels::sym6_reads_high_bits() ? p->hb : std::vector<uint8_t>{});
  EXPECT_TRUE(kernels::int8_high_bits(random_sym(8, rows, cols, 94)->symm).empty());
  expect_attached(p->symm);
  expect_attached(random_sym(8, rows, cols, 94)->symm);
}

// The product is the dense fp32 kernel over the decoded rows, bit for bit (kernels/qmatmul.h):
// the same summation order as an fp32 checkpoint holding the dequantised weights.
TEST(Qmatmul, EveryProductIsTheDenseDotOfTheDequantisedRow) {
  const int64_t rows = 45, cols = 512;
  for (const auto& p : all_layouts(rows, cols, 700)) {
    const std::vector<float> w = p->dequantized();
    for (Isa isa : isas_of_this_cpu()) {
      const DotKernels& dense = dot_kernels_for(isa);
      for (int64_t T : {1, 5, 37}) {
        const std::vector<float> x = random_inputs(T * cols, 40 + static_cast<uint32_t>(T));
        std::vector<float> y(T * rows);
        p->qmatmul(isa, x.data(), T, y.data());
        for (int64_t t = 0; t < T; ++t)
          for (int64_t o = 0; o < rows; ++o) {
            const float want = dense.f32(w.data() + o * cols, x.data() + t * cols, cols);
            ASSERT_EQ(std::memcmp(&y[t * rows + o], &want, sizeof(float)), 0)
                << p->name() << " " << isa_name(isa) << " T=" << T << " t=" << t << " o=" << o
                << ": " << y[t * rows + o] << " vs " << want;
          }
      }
    }
  }
}

// X = identity: Y[t, o] = W[o, t]. Every product q * s is exact and only the addition of m rounds
// (when no block sits at the 1e-8 floor), so each ISA must return the dequantised weights exactly:
// this checks every code, plane bit and scale of the decoders, whatever the summation order.
TEST(Qmatmul, OneHotInputsGiveTheDequantisedWeightsExactly) {
  const int64_t rows = 19, cols = 512;
  std::vector<std::unique_ptr<Packed>> layouts;
  for (int bits : {4, 5, 6}) layouts.push_back(random_sb6(bits, rows, cols, 7 + bits, true));
  for (int bits : {6, 8}) layouts.push_back(random_sym(bits, rows, cols, 17 + bits));
  std::vector<float> eye(cols * cols, 0.0f);
  for (int64_t i = 0; i < cols; ++i) eye[i * cols + i] = 1.0f;
  for (const auto& p : layouts) {
    const std::vector<float> w = p->dequantized();
    for (Isa isa : isas_of_this_cpu()) {
      std::vector<float> y(cols * rows);
      p->qmatmul(isa, eye.data(), cols, y.data());
      int failures = 0;
      for (int64_t o = 0; o < rows && failures < 5; ++o)
        for (int64_t c = 0; c < cols && failures < 5; ++c)
          if (y[c * rows + o] != w[o * cols + c]) {
            ++failures;
            ADD_FAILURE() << p->name() << " " << isa_name(isa) << " W[" << o << "," << c
                          << "]: got " << y[c * rows + o] << " want " << w[o * cols + c];
          }
    }
  }
}

// The worked examples of docs/rwkvq-format.md §2.2 / §2.3, as one-row matrices (the example block
// first, zeros elsewhere), read back with one-hot inputs.
TEST(Qmatmul, SpecWorkedExamplesDecode) {
  const int64_t cols = 256;
  std::vector<float> eye(cols * cols, 0.0f);
  for (int64_t i = 0; i < cols; ++i) eye[i * cols + i] = 1.0f;
  auto check = [&](const Packed& p, std::vector<std::pair<int, float>> want) {
    for (Isa isa : isas_of_this_cpu()) {
      std::vector<float> y(cols);
      p.qmatmul(isa, eye.data(), cols, y.data());
      for (auto [c, v] : want)
        EXPECT_FLOAT_EQ(y[c], v) << p.name() << " " << isa_name(isa) << " c=" << c;
    }
  };
  {  // sb6@5, tiny_compression blocks.1.att.key.weight row 5, block 0.
    Packed p;
    p.bits = 5;
    p.rows = 1;
    p.cols = cols;
    p.codes_packed = {0x11, 0xf4, 0x23, 0x21, 0x43, 0x31, 0x12, 0x94,
                      0x24, 0x12, 0x41, 0x54, 0x04, 0x53, 0x32, 0x55};
    p.codes_packed.resize(cols / 2, 0);
    p.qh = {0x00, 0x00, 0x02, 0x00};
    p.qh.resize(cols / 8, 0);
    p.qsqm = {0x3f, 0x35, 0x59, 0xe0, 0x44, 0x65, 0x96, 0xa3, 0x30, 0x40, 0xe4, 0x30};
    p.d = {0x68, 0x0e};
    p.dm = {0x70, 0x1f};
    p.finish();
    check(p, {{0, -0.040740967f}, {17, 0.6980896f}});
  }
  {  // sym@8, tiny_reduction blocks.1.att.key.weight row 5, block 0.
    Packed p;
    p.sym = true;
    p.bits = 8;
    p.rows = 1;
    p.cols = cols;
    p.codes.assign(cols, 0);  // (not an initializer list + resize: a GCC 12 stringop false positive)
    const uint8_t first[] = {static_cast<uint8_t>(-113), 60, 28, static_cast<uint8_t>(-96)};
    std::copy(std::begin(first), std::end(first), p.codes.begin());
    p.qs.assign(cols / 16, 0);
    p.qs[0] = 10;
    p.d = {0xdf, 0x02};
    p.finish();
    check(p, {{0, -0.04951811f}, {1, 0.0262928f}, {2, 0.012269974f}, {3, -0.04206848f}});
  }
  {  // sym@6, tiny_reduction blocks.0.ffn.value.weight row 0, block 0.
    Packed p;
    p.sym = true;
    p.bits = 6;
    p.rows = 1;
    p.cols = cols;
    p.codes_packed = {0xf7, 0xb8, 0xad, 0xb8, 0xec, 0xa0, 0xbf, 0x8c};
    p.codes_packed.resize(cols / 2, 0);
    p.qh = {0x2e, 0x3a};
    p.qh.resize(cols / 8, 0);
    p.qh2 = {0xa4, 0x41};
    p.qh2.resize(cols / 8, 0);
    p.qs.assign(cols / 16, 0);
    p.qs[0] = 64;
    p.d = {0x89, 0x02};
    p.finish();
    check(p, {{0, -0.061893463f}, {1, -0.019805908f}, {2, 0.07179642f}, {3, -0.019805908f}});
  }
}

// A prefill over long rows (2048 columns, 64 inputs: kernels/matmul.h decoded_gemm_lane_major,
// the lane-major panels on AVX2 / AVX-512) with the real decoders, a block at a time: every
// checked input's row equals the fused GEMV of that input bit for bit, with 1 and 3 threads.
TEST(Qmatmul, LongRowPrefillRowsAreTheFusedGemvOfTheirInputs) {
  const int64_t rows = 260, cols = 2048, T = 64;
  const std::vector<float> x = random_inputs(T * cols, 6);
  for (const auto& p : all_layouts(rows, cols, 901)) {
    for (Isa isa : isas_of_this_cpu()) {
      EXPECT_EQ(decoded_gemm_lane_major(dot_kernels_for(isa), rows, cols, T), isa != Isa::kScalar);
      for (int threads : {1, 3}) {
        set_test_threads(threads);
        std::vector<float> y(T * rows), y1(rows);
        p->qmatmul(isa, x.data(), T, y.data());
        for (int64_t t = 0; t < T; t += 9) {
          p->qmatmul(isa, x.data() + t * cols, 1, y1.data());
          ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * sizeof(float)), 0)
              << p->name() << " " << isa_name(isa) << " threads=" << threads << " t=" << t;
        }
        EXPECT_NE(std::memcmp(y.data(), y.data() + rows, rows * sizeof(float)), 0);
      }
    }
  }
  set_test_threads(0);
}

// The determinism contract: output (t, o) does not depend on T, on the tile of inputs it falls in
// or on the thread count.
TEST(Qmatmul, BatchRowsAreBitIdenticalToSingleInputsForAnyThreadCount) {
  // 71 rows: the last work item has an odd number of rows (the GEMV pairs rows).
  const int64_t rows = 71, cols = 512, T = 37;
  const std::vector<float> x = random_inputs(T * cols, 5);
  for (const auto& p : all_layouts(rows, cols, 900)) {
    for (Isa isa : isas_of_this_cpu()) {
      std::vector<float> first;
      for (int threads : {1, 2, 3, 5}) {
        set_test_threads(threads);
        std::vector<float> y(T * rows), y1(rows);
        p->qmatmul(isa, x.data(), T, y.data());
        for (int64_t t = 0; t < T; ++t) {
          p->qmatmul(isa, x.data() + t * cols, 1, y1.data());
          ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * sizeof(float)), 0)
              << p->name() << " " << isa_name(isa) << " threads=" << threads << " t=" << t;
        }
        // A batch starting elsewhere puts each input in another tile position.
        std::vector<float> y5(5 * rows);
        p->qmatmul(isa, x.data() + 3 * cols, 5, y5.data());
        ASSERT_EQ(std::memcmp(y5.data(), y.data() + 3 * rows, y5.size() * sizeof(float)), 0)
            << p->name() << " " << isa_name(isa) << " threads=" << threads;
        if (first.empty()) {
          first = y;
        } else {
          ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0)
              << p->name() << " " << isa_name(isa) << ": 1 thread != " << threads;
        }
      }
    }
  }
  set_test_threads(0);
}

TEST(Qmatmul, DifferentInputsGiveDifferentOutputs) {
  const int64_t rows = 33, cols = 768;
  const std::vector<float> a = random_inputs(cols, 1), b = random_inputs(cols, 2);
  for (const auto& p : all_layouts(rows, cols, 300)) {
    for (Isa isa : isas_of_this_cpu()) {
      std::vector<float> ya(rows), yb(rows);
      p->qmatmul(isa, a.data(), 1, ya.data());
      p->qmatmul(isa, b.data(), 1, yb.data());
      int same = 0;
      for (int64_t o = 0; o < rows; ++o) same += ya[o] == yb[o];
      EXPECT_EQ(same, 0) << p->name() << " " << isa_name(isa);
    }
  }
}

TEST(Qmatmul, PublicEntryPointUsesTheActiveIsa) {
  const int64_t rows = 40, cols = 256;
  const std::vector<float> x = random_inputs(2 * cols, 9);
  auto p = random_sb6(5, rows, cols, 4);
  auto q = random_sym(8, rows, cols, 4);
  std::vector<float> y(2 * rows), want(2 * rows);
  qmatmul(p->sb6, x.data(), 2, y.data(), test_pool());
  p->qmatmul(active_isa(), x.data(), 2, want.data());
  EXPECT_EQ(y, want);
  qmatmul(q->symm, x.data(), 2, y.data(), test_pool());
  q->qmatmul(active_isa(), x.data(), 2, want.data());
  EXPECT_EQ(y, want);
}

// ---- integer products of inputs rounded to 8 bits (qmatmul_int8_inputs) --------------------

struct RoundedInputs {
  std::vector<int8_t> codes;
  std::vector<float> scales, rounded;
  Int8Inputs view;
};

RoundedInputs round_inputs(const std::vector<float>& x, int64_t T, int64_t cols) {
  RoundedInputs r;
  r.codes.resize(T * cols);
  r.scales.resize(T * int8_input_blocks(cols));
  r.rounded.resize(T * cols);
  round_inputs_int8(x.data(), T, cols, r.codes.data(), r.scales.data(), test_pool());
  r.view = Int8Inputs{r.codes.data(), r.scales.data(), T, cols};
  int8_inputs_as_floats(r.view, r.rounded.data(), test_pool());
  return r;
}

std::vector<float> int8_product(Isa isa, const Packed& p, const RoundedInputs& x) {
  std::vector<float> y(x.view.T * p.rows);
  if (p.sym) {
    qmat::qmatmul_int8_inputs_isa(isa, p.symm, x.view, y.data(), test_pool());
  } else {
    qmat::qmatmul_int8_inputs_isa(isa, p.sb6, x.view, y.data(), test_pool());
  }
  return y;
}

// Each superblock of 256 columns (the last one shorter) is rounded by the INT8 row rule on its
// own: scale max|v| / 127, codes in [-127, 127] within half a step of v / scale, the rounded value
// code * scale; an all-zero superblock has scale 0, one holding an inf scale NaN and codes 0.
TEST(Int8Inputs, EachSuperblockIsRoundedOnItsOwn) {
  const int64_t T = 3, cols = 600;  // superblocks of 256, 256, 88
  std::vector<float> x = random_inputs(T * cols, 17);
  for (int64_t c = 256; c < 512; ++c) x[cols + c] = 0.0f;  // row 1, superblock 1: zero
  x[2 * cols + 520] = INFINITY;                            // row 2, superblock 2: inf
  x[5] = 1000.0f;  // row 0, superblock 0: one large value sets only its own scale
  const RoundedInputs r = round_inputs(x, T, cols);
  ASSERT_EQ(int8_input_blocks(cols), 3);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t c0 = 256 * b, c1 = std::min<int64_t>(cols, c0 + 256);
      float amax = 0;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::abs(x[t * cols + c]));
      const float s = r.scales[t * 3 + b];
      if (t == 2 && b == 2) {
        EXPECT_TRUE(std::isnan(s));
        for (int64_t c = c0; c < c1; ++c) EXPECT_EQ(r.codes[t * cols + c], 0);
        continue;
      }
      EXPECT_EQ(s, amax / 127.0f) << t << " " << b;
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t i = t * cols + c;
        ASSERT_GE(r.codes[i], -127);
        EXPECT_EQ(r.rounded[i], static_cast<float>(r.codes[i]) * s);
        if (s > 0) EXPECT_LE(std::abs(x[i] / s - r.codes[i]), 0.5f + 1e-4f) << i;
      }
    }
  EXPECT_EQ(r.scales[1 * 3 + 1], 0.0f);
  // The large value in row 0's first superblock leaves its second superblock's scale alone.
  EXPECT_LT(r.scales[1], 10.0f / 127.0f);
}

// The integer kernels of every instruction set give the scalar reference's bits (exact int32
// sums, one float sequence), every layout and bit width, rows split unevenly over the interleaved
// code streams, with 1 and 2 threads.
TEST(QmatmulInt8Inputs, EveryIsaGivesTheScalarBits) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{71, 512}, {33, 768}}) {
    for (const auto& p : all_layouts(rows, cols, 40 + static_cast<uint32_t>(cols))) {
      for (int64_t T : {1, 5, 20}) {  // GEMV once, GEMV per input, the tile
        const RoundedInputs x =
            round_inputs(random_inputs(T * cols, 3 + static_cast<uint32_t>(T)), T, cols);
        const std::vector<float> want = int8_product(Isa::kScalar, *p, x);
        for (Isa isa : isas_of_this_cpu())
          for (int threads : {1, 2}) {
            set_test_threads(threads);
            const std::vector<float> y = int8_product(isa, *p, x);
            ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
                << p->name() << " " << qmat::int8_input_kernels_for(isa).name << " T=" << T
                << " threads=" << threads;
          }
      }
    }
  }
  set_test_threads(0);
}

// What the integer sums compute: the dot product of the dequantised row (quant::dequantize) with
// the rounded inputs, here summed in double - so codes, plane bits, scales and the sb6 order of
// the inputs are all checked against data the kernels did not produce.
TEST(QmatmulInt8Inputs, IsTheDequantisedRowTimesTheRoundedInputs) {
  const int64_t rows = 37, cols = 768;
  for (const auto& p : all_layouts(rows, cols, 80)) {
    const std::vector<float> w = p->dequantized();
    for (int64_t T : {1, 3, 14}) {  // the GEMV, once and per input, and the tile
      const RoundedInputs x = round_inputs(random_inputs(T * cols, 8), T, cols);
      for (Isa isa : isas_of_this_cpu()) {
        const std::vector<float> y = int8_product(isa, *p, x);
        expect_close_to_oracle(
            *p, w, x.rounded.data(), T, y.data(),
            p->name() + " int8 " + std::string(isa_name(isa)) + " T=" + std::to_string(T));
      }
    }
  }
}

// Output (t, o) is a function of W[o] and X[t] alone: a batch row equals the single input (the
// tile, with its inputs split into spans over the threads, and the GEMV per input alike), with 1
// and 2 threads, and other inputs give other outputs.
TEST(QmatmulInt8Inputs, BatchRowsEqualSingleInputsAndOtherInputsDiffer) {
  const int64_t rows = 71, cols = 512, T = 70;
  const std::vector<float> xs = random_inputs(T * cols, 21);
  const RoundedInputs x = round_inputs(xs, T, cols);
  const std::vector<float> x5(xs.begin() + 3 * cols, xs.begin() + 8 * cols);
  const RoundedInputs five = round_inputs(x5, 5, cols);
  const std::vector<float> x4(xs.begin() + 10 * cols, xs.begin() + 14 * cols);
  const RoundedInputs four = round_inputs(x4, 4, cols);  // the GEMV's inputs in two pairs
  for (const auto& p : all_layouts(rows, cols, 90)) {
    for (Isa isa : isas_of_this_cpu())
      for (int threads : {1, 2}) {
        set_test_threads(threads);
        const std::vector<float> y = int8_product(isa, *p, x);
        const std::string what = p->name() + " " + std::string(isa_name(isa)) +
                                 " threads=" + std::to_string(threads);
        for (int64_t t = 0; t < T; ++t) {
          const std::vector<float> one(xs.begin() + t * cols, xs.begin() + (t + 1) * cols);
          const std::vector<float> y1 = int8_product(isa, *p, round_inputs(one, 1, cols));
          ASSERT_EQ(std::memcmp(y1.data(), y.data() + t * rows, rows * sizeof(float)), 0)
              << what << " t=" << t;
          if (t > 0) {
            int same = 0;
            for (int64_t o = 0; o < rows; ++o) same += y[t * rows + o] == y[o];
            EXPECT_EQ(same, 0) << what << " t=" << t;
          }
        }
        const std::vector<float> y5 = int8_product(isa, *p, five);
        ASSERT_EQ(std::memcmp(y5.data(), y.data() + 3 * rows, y5.size() * sizeof(float)), 0)
            << what << " (5 inputs)";
        const std::vector<float> y4 = int8_product(isa, *p, four);
        ASSERT_EQ(std::memcmp(y4.data(), y.data() + 10 * rows, y4.size() * sizeof(float)), 0)
            << what << " (4 inputs)";
      }
  }
  set_test_threads(0);
}

// The documented arithmetic itself (kernels/qmatmul.h), computed here from the test's own packed
// fields (6-bit qs / qm, fp16 d / dm, nibbles and planes) and the rounded input codes: the scalar
// kernel - and through EveryIsaGivesTheScalarBits every kernel - must give these bits, so a
// changed order of the epilogue or of the final tree fails here even where all kernels change
// together.
TEST(QmatmulInt8Inputs, FollowsTheDocumentedSequenceBitForBit) {
  const int64_t rows = 5, cols = 512;
  for (int bits : {4, 5, 6}) {
    auto p = random_sb6(bits, rows, cols, 30 + bits);
    const RoundedInputs x = round_inputs(random_inputs(cols, 31), 1, cols);
    const std::vector<float> got = int8_product(Isa::kScalar, *p, x);
    const int64_t nsb = cols / 256;
    auto six = [&](int64_t sb, int k) { return six_bits(p->qsqm, sb, k); };
    for (int64_t r = 0; r < rows; ++r) {
      float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t j = 0; j < nsb; ++j) {
        const int64_t sb = r * nsb + j;
        for (int i = 0; i < 8; ++i) {
          const float s =
              std::max(base::round_to_half(static_cast<float>(six(sb, i)) * get_f16(p->d, sb)), 1e-8f);
          const float m =
              base::round_to_half(static_cast<float>(six(sb, 8 + i) - 31) * get_f16(p->dm, sb));
          int32_t S = 0, Q = 0;
          for (int e = 0; e < 32; ++e) {
            const int64_t c = 256 * j + 32 * i + e;
            const uint8_t byte = p->codes_packed[r * cols / 2 + (c / 32) * 16 + (e & 15)];
            int q = e < 16 ? (byte & 15) : (byte >> 4);
            if (bits >= 5) q += 16 * ((p->qh[r * cols / 8 + c / 8] >> (c % 8)) & 1);
            if (bits >= 6) q += 32 * ((p->qh2[r * cols / 8 + c / 8] >> (c % 8)) & 1);
            S += q * x.codes[c];
            Q += x.codes[c];
          }
          const float sum_s = static_cast<float>(S) * s;
          const float sum_m = static_cast<float>(Q) * m;
          const float t = sum_s + sum_m;
          const float scaled = t * x.scales[j];
          a[i] = a[i] + scaled;
        }
      }
      const float lo = (a[0] + a[4]) + (a[2] + a[6]), hi = (a[1] + a[5]) + (a[3] + a[7]);
      const float want = lo + hi;
      EXPECT_EQ(std::memcmp(&got[r], &want, sizeof(float)), 0)
          << p->name() << " row " << r << ": " << got[r] << " vs " << want;
    }
  }
}

// The largest sums: every weight code 63 against input codes of +-127 (the AVX2 kernels' int16
// pair sums at their bound), on every path.
TEST(QmatmulInt8Inputs, LargestCodesGiveTheScalarBits) {
  const int64_t rows = 20, cols = 256;
  auto p = random_sb6(6, rows, cols, 12, true);
  std::fill(p->codes_packed.begin(), p->codes_packed.end(), uint8_t{0xff});
  std::fill(p->qh.begin(), p->qh.end(), uint8_t{0xff});
  std::fill(p->qh2.begin(), p->qh2.end(), uint8_t{0xff});
  p->unpack();  // the high bits the AVX2 GEMV reads follow the planes
  for (int64_t T : {1, 14}) {
    std::vector<float> xs(T * cols);
    for (int64_t i = 0; i < T * cols; ++i) xs[i] = (i / 3) % 2 ? 1.0f : -1.0f;
    const RoundedInputs x = round_inputs(xs, T, cols);
    ASSERT_EQ(x.codes[0], -127);
    ASSERT_EQ(x.codes[3], 127);
    const std::vector<float> want = int8_product(Isa::kScalar, *p, x);
    for (Isa isa : isas_of_this_cpu()) {
      const std::vector<float> y = int8_product(isa, *p, x);
      EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
          << isa_name(isa) << " T=" << T;
    }
  }
}

// The documented sym arithmetic (kernels/qmatmul.h), computed here from the test's own packed
// fields (8-bit codes, or nibbles with the gs-16 split and bit planes; qs; fp16 d) and the rounded
// input codes: 16 blocks per superblock into the 8 partial sums, blocks i and i + 8 into a_i.
TEST(QmatmulInt8Inputs, SymFollowsTheDocumentedSequenceBitForBit) {
  const int64_t rows = 5, cols = 512, nsb = cols / 256;
  for (int bits : {6, 8}) {
    auto p = random_sym(bits, rows, cols, 50 + bits);
    const RoundedInputs x = round_inputs(random_inputs(cols, 51), 1, cols);
    const std::vector<float> got = int8_product(Isa::kScalar, *p, x);
    auto code = [&](int64_t r, int64_t c) {
      if (bits == 8) return static_cast<int>(static_cast<int8_t>(p->codes[r * cols + c]));
      const int64_t e = c % 16;
      const uint8_t byte = p->codes_packed[r * cols / 2 + (c / 16) * 8 + (e & 7)];
      int u = e < 8 ? (byte & 15) : (byte >> 4);
      u += 16 * ((p->qh[r * cols / 8 + c / 8] >> (c % 8)) & 1);
      u += 32 * ((p->qh2[r * cols / 8 + c / 8] >> (c % 8)) & 1);
      return u - 32;
    };
    for (int64_t r = 0; r < rows; ++r) {
      float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int64_t j = 0; j < nsb; ++j) {
        const float d = get_f16(p->d, r * nsb + j);
        for (int i = 0; i < 16; ++i) {
          const int64_t b = 16 * j + i;
          const float s = base::round_to_half(
              static_cast<float>(static_cast<int8_t>(p->qs[r * cols / 16 + b])) * d);
          int32_t S = 0;
          for (int64_t c = 16 * b; c < 16 * b + 16; ++c) S += code(r, c) * x.codes[c];
          const float sum_s = static_cast<float>(S) * s;
          const float scaled = sum_s * x.scales[j];
          a[i % 8] = a[i % 8] + scaled;
        }
      }
      const float lo = (a[0] + a[4]) + (a[2] + a[6]), hi = (a[1] + a[5]) + (a[3] + a[7]);
      const float want = lo + hi;
      EXPECT_EQ(std::memcmp(&got[r], &want, sizeof(float)), 0)
          << p->name() << " row " << r << ": " << got[r] << " vs " << want;
    }
  }
}

// sym's extreme codes against input codes of +-127 on every path: -128 (the AVX2 kernel's int16
// pair sums at their bound, 2 * 128 * 127) and 127 at 8 bits, -32 and 31 at 6. The inputs' signs
// change every 16 columns (a block), so all of a block's products share a sign: adding two pairs
// in int16 before widening would overflow, and the error could not cancel within the block.
TEST(QmatmulInt8Inputs, SymLargestCodesGiveTheScalarBits) {
  const int64_t rows = 20, cols = 256;
  for (auto [bits, fill] : {std::pair<int, uint8_t>{8, 0x80}, {8, 0x7f}, {6, 0x00}, {6, 0xff}}) {
    auto p = random_sym(bits, rows, cols, 13);
    for (auto* buf : {&p->codes, &p->codes_packed, &p->qh, &p->qh2})
      std::fill(buf->begin(), buf->end(), fill);
    p->unpack();  // the high bits the SIMD GEMVs read follow the planes
    for (int64_t T : {1, 14}) {
      std::vector<float> xs(T * cols);
      for (int64_t i = 0; i < T * cols; ++i) xs[i] = (i / 16) % 2 ? 1.0f : -1.0f;
      const RoundedInputs x = round_inputs(xs, T, cols);
      ASSERT_EQ(x.codes[0], -127);
      const std::vector<float> want = int8_product(Isa::kScalar, *p, x);
      ASSERT_TRUE(std::isfinite(want[0]));
      for (Isa isa : isas_of_this_cpu()) {
        const std::vector<float> y = int8_product(isa, *p, x);
        EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0)
            << p->name() << " fill " << int{fill} << " " << isa_name(isa) << " T=" << T;
      }
    }
  }
}

// A superblock of NaN / inf inputs makes every output NaN, as the fp32 product would be
// non-finite; the public entry point runs the active instruction set's kernel.
TEST(QmatmulInt8Inputs, NonFiniteInputsGiveNaNAndThePublicEntryPointMatches) {
  const int64_t rows = 40, cols = 512;
  auto p = random_sb6(4, rows, cols, 5);
  auto q = random_sym(8, rows, cols, 5);
  for (int64_t T : {2, 14}) {  // the GEMV per input and the tile
    std::vector<float> xs = random_inputs(T * cols, 9);
    xs[cols + 300] = NAN;
    const RoundedInputs x = round_inputs(xs, T, cols);
    std::vector<float> y(T * rows);
    qmatmul_int8_inputs(q->symm, x.view, y.data(), test_pool());
    const std::vector<float> want_sym = int8_product(active_isa(), *q, x);
    EXPECT_EQ(std::memcmp(y.data(), want_sym.data(), y.size() * sizeof(float)), 0);
    for (int64_t o = 0; o < rows; ++o) {
      EXPECT_TRUE(std::isfinite(y[o]));
      EXPECT_TRUE(std::isnan(y[rows + o]));
    }
    qmatmul_int8_inputs(p->sb6, x.view, y.data(), test_pool());
    const std::vector<float> want = int8_product(active_isa(), *p, x);
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0);
    for (int64_t o = 0; o < rows; ++o) {
      EXPECT_TRUE(std::isfinite(y[o]));
      EXPECT_TRUE(std::isnan(y[rows + o]));
    }
  }
}

}  // namespace
}  // namespace wick::kernels
