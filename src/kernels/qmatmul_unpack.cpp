// The arrays the SIMD packed kernels read beside the file's (kernels/qmatmul.h: Sb6Matrix::sm and
// ::hb; SymMatrix::hb), made once per matrix by their owner (model/quant_linear.h:
// the sb6 scales at load, the high bits on the first integer product).
#include "base/check.h"
#include "kernels/kernel_table.h"
#include "kernels/qmatmul.h"
#include "kernels/qmatmul_impl.h"

namespace wick::kernels {

std::vector<uint16_t> unpack_sb6_scales(const Sb6Matrix& w) {
  std::vector<uint16_t> out(static_cast<size_t>(w.rows * (w.cols / 256) * 16));
  kernel_table().packed.unpack_sb6_scales(w, 0, w.rows, out.data());
  return out;
}

std::vector<uint8_t> repack_sb6_high_bits(const Sb6Matrix& w) {
  WICK_CHECK((w.bits == 5 || w.bits == 6) && w.qh != nullptr && (w.bits == 5 || w.qh2 != nullptr) &&
                 w.rows >= 0 && w.cols > 0 && w.cols % 256 == 0,
             "repack_sb6_high_bits takes a 5- or 6-bit sb6 view with its planes");
  std::vector<uint8_t> out(static_cast<size_t>(w.rows * (w.cols / 256) * 32 * (w.bits - 4)));
  kernel_table().packed.repack_sb6_high_bits(w, 0, w.rows, out.data());
  return out;
}

std::vector<uint8_t> repack_sym6_high_bits(const SymMatrix& w) {
  WICK_CHECK(w.bits == 6 && w.qh != nullptr && w.qh2 != nullptr && w.rows >= 0 && w.cols > 0 &&
                 w.cols % 256 == 0,
             "repack_sym6_high_bits takes a sym@6 view with its planes");
  std::vector<uint8_t> out(static_cast<size_t>(w.rows * (w.cols / 256) * 64));
  kernel_table().packed.repack_sym6_high_bits(w, 0, w.rows, out.data());
  return out;
}

std::vector<uint8_t> int8_high_bits(const Sb6Matrix& w) {
  if (w.bits < 5 || !sb6_reads_high_bits()) return {};
  return repack_sb6_high_bits(w);
}

std::vector<uint8_t> int8_high_bits(const SymMatrix& w) {
  if (w.bits != 6 || !sym6_reads_high_bits()) return {};
  return repack_sym6_high_bits(w);
}

namespace {
template <class M>
std::vector<uint8_t> attach(M& w) {
  std::vector<uint8_t> hb = int8_high_bits(w);
  w.hb = hb.empty() ? nullptr : hb.data();
  return hb;
}
}  // namespace

std::vector<uint8_t> attach_int8_high_bits(Sb6Matrix& w) {
  return attach(w);
}
std::vector<uint8_t> attach_int8_high_bits(SymMatrix& w) {
  return attach(w);
}

bool sym6_reads_high_bits() {
  return kernel_table().packed_int8->sym6_high_bits;
}

bool sb6_reads_high_bits() {
  return kernel_table().packed_int8->sb6_high_bits;
}

}  // namespace wick::kernels
