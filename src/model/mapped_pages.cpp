// What the loaded model asks of the pages of its mapped files (model/model_impl.h): giving back
// the pages of converted matrices and advising the embedding table's pages for sparse reads.
#include "io/mapped_file.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/model_impl.h"

namespace wick::model {

size_t on_mapped_pages(const Model::Impl& impl, const void* data, size_t bytes,
                       size_t (io::MappedFile::*op)(const void*, size_t) const) {
  for (const io::TensorSet& set : impl.sources)
    for (const auto& file : set.files())
      if (const size_t done = (file.get()->*op)(data, bytes); done > 0) return done;
  return 0;
}

ByteRange dense_embedding_bytes(const ModelWeights& w) {
  const auto* e = dynamic_cast<const DenseEmbedding*>(w.emb.get());
  if (e == nullptr) return {};
  return {e->data(), static_cast<size_t>(e->stored_bytes())};
}

size_t advise_sparse_embedding(const Model::Impl& impl) {
  const Embedding* emb = impl.weights.emb.get();
  if (emb == nullptr) return 0;
  const ByteRange dense = dense_embedding_bytes(impl.weights);
  const auto* head = dynamic_cast<const DenseLinear*>(impl.weights.head.get());
  if (dense.data != nullptr && head != nullptr && head->matrix().data == dense.data)
    return 0;  // tied: the head reads the whole table every step
  size_t advised = 0;
  for (const ByteRange& r : emb->stored_ranges())
    advised += on_mapped_pages(impl, r.data, r.bytes, &io::MappedFile::advise_sparse);
  return advised;
}

}  // namespace wick::model
