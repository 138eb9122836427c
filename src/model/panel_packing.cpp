#include "model/panel_packing.h"

#include <vector>

#include "base/huge_buffer.h"
#include "io/mapped_file.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/panels.h"
#include "model/int8_linear.h"
#include "model/linear.h"

namespace wick::model {

uint64_t pack_model_panels(Model::Impl& impl, Precision precision, kernels::ThreadPool& pool) {
  if (kernels::active_isa() == kernels::Isa::kScalar) return 0;
  const bool bf16_dot = precision == Precision::kBf16 && kernels::bf16_dot_kernels() != nullptr;
  // The matrices to pack, and where each goes in one buffer for them all (64-byte aligned).
  struct Job {
    std::unique_ptr<Linear>* slot;
    size_t offset;
  };
  std::vector<Job> jobs;
  size_t total = 0;
  for (const Int8Target& t : table_linears(impl.weights)) {
    const Linear* L = t.slot->get();
    const kernels::MatrixRef* m = L != nullptr ? L->dense_matrix() : nullptr;
    if (m == nullptr || m->layout != kernels::MatrixLayout::kRows) continue;
    if (is_embedding_table(impl.weights, m->data)) continue;
    if (bf16_dot && m->dtype == DType::BF16) continue;
    jobs.push_back({t.slot, total});
    total += (kernels::panel_bytes(m->rows, m->cols, m->dtype) + 63) / 64 * 64;
  }
  if (jobs.empty()) return 0;
  // One buffer on huge pages (the file's mapping was advised for them too, io/mapped_file.h);
  // its pages are committed as each matrix is packed, while the file's pages of the matrices
  // already packed are given back, so the resident total stays about one copy of the weights.
  const std::shared_ptr<uint8_t> buffer = base::huge_page_buffer(total);
  uint64_t packed = 0;
  for (const Job& j : jobs) {
    const Linear& L = **j.slot;
    const kernels::MatrixRef m = *L.dense_matrix();
    const uint64_t bytes = L.stored_bytes();
    packed += static_cast<uint64_t>(m.rows * m.cols);
    auto panels =
        DenseLinear::packed(m, std::shared_ptr<uint8_t>(buffer, buffer.get() + j.offset), pool);
    // A borrowed matrix's pages are given back, then the row-major Linear (and anything it
    // owned) goes.
    on_mapped_pages(impl, m.data, bytes, &io::MappedFile::release_pages);
    *j.slot = std::move(panels);
  }
  return packed;
}

}  // namespace wick::model
