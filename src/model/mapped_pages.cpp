// What the loaded model asks of the pages of its mapped files (model/model_impl.h): giving back
// the pages of converted matrices and advising the embedding table's pages for sparse reads.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "io/mapped_file.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/model_impl.h"

namespace wick::model {

size_t on_mapped_pages(const Model::Impl& impl, const void* data, size_t bytes,
                       size_t (io::MappedFile::*op)(const void*, size_t) const) {
  for (const io::TensorSet& set : impl.sources)
    for (const auto& file : set.files())
      if (file->holds(data, bytes)) return (file.get()->*op)(data, bytes);
  return 0;
}

ByteRange dense_embedding_bytes(const ModelWeights& w) {
  const auto* e = dynamic_cast<const DenseEmbedding*>(w.emb.get());
  if (e == nullptr) return {};
  return {e->data(), static_cast<size_t>(e->stored_bytes())};
}

bool is_embedding_table(const ModelWeights& w, const void* data) {
  const ByteRange table = dense_embedding_bytes(w);
  return table.data != nullptr && data == table.data;
}

size_t advise_sparse_embedding(const Model::Impl& impl) {
  const ModelWeights& w = impl.weights;
  if (w.emb == nullptr) return 0;
  const kernels::MatrixRef* head = w.head ? w.head->dense_matrix() : nullptr;
  if (head != nullptr && is_embedding_table(w, head->data))
    return 0;  // tied: the head reads the whole table every step
  // A packed table's buffers lie one after another with a little padding between: advised one by
  // one, the pages at the seams and the mapping's splits there would stay as they were.
  struct Span {
    uintptr_t lo, hi;
  };
  std::vector<Span> spans;
  for (const ByteRange& r : w.emb->stored_ranges()) {
    const auto lo = reinterpret_cast<uintptr_t>(r.data);
    spans.push_back({lo, lo + r.bytes});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  constexpr uintptr_t kSeam = 4096;  // at most this far apart: one range
  std::vector<Span> merged;
  for (const Span& s : spans) {
    if (!merged.empty() && s.lo <= merged.back().hi + kSeam)
      merged.back().hi = std::max(merged.back().hi, s.hi);
    else
      merged.push_back(s);
  }
  size_t advised = 0;
  for (const Span& s : merged)
    advised += on_mapped_pages(impl, reinterpret_cast<const void*>(s.lo), s.hi - s.lo,
                               &io::MappedFile::advise_sparse);
  return advised;
}

}  // namespace wick::model
