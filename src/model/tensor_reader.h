// The one weight reader of the loaders: the x070 blocks (model/loader.cpp) and the RWKV-X
// attention blocks (model/load_rwkvx.cpp) read their tensors through it, from a dense checkpoint
// or from the logical view of a `.rwkvq` file alike.
//
// It reads tensors by name, checks dtypes and shapes (and the small tensors for NaN / inf),
// builds the Linears and the embedding - packed sb6 / sym projections stay packed in the mapped
// file, other packed layouts are dequantised once, dense ones are borrowed from the file - and
// remembers what was read, so that tensors nobody read are refused. Errors are CheckpointErrors
// naming the file, the tensor (stored and official name), what was expected and what was found.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/naming.h"
#include "quant/rwkvq.h"
#include "wick/model.h"

namespace wick::model {

class TensorReader {
 public:
  // `names`: the tensors by the name callers ask for. `path`: the file, for messages.
  // `complete`: what a complete set of them is, for the missing-tensor message ("a complete
  // RWKV-7 x070 checkpoint"). `packed` (may be null): the .rwkvq the tensors are the logical view
  // of; its non-dense record with key `packed_prefix` + stored name is read through it (RWKV-X
  // reads the x070 part under the prefix "rwkv.").
  TensorReader(model::OfficialNames names, std::string path, std::string complete,
               const quant::RwkvqFile* packed = nullptr, const std::string& packed_prefix = "");

  // The packed record behind a tensor, or null for a tensor stored dense.
  const quant::QuantTensor* packed(const model::MappedTensor& t) const;
  // The values of a tensor as fp32, whatever its storage.
  std::vector<float> values(const model::MappedTensor& t) const;

  bool has(const std::string& name) const { return names_.tensors.count(name) != 0; }
  // The tensor `name`, checked to exist and to hold floats; marks it read.
  const model::MappedTensor& get(const std::string& name);
  // A tensor that is known but not used (x070 layer-0 v0/v1/v2): neither read nor refused as
  // unknown, and not counted by tally().
  void ignore(const std::string& name);

  // A per-channel vector of `n` elements (any nominal shape: [n], [1,1,n], [1,n], [H,N]); its
  // values are checked to be finite.
  std::vector<float> vector(const std::string& name, int64_t n);
  // values(), checked to be finite (the small tensors: vectors, norms, LoRA factors; the large
  // projections are not scanned at load).
  std::vector<float> finite_values(const model::MappedTensor& t, const std::string& name);
  // A 2-D matrix with the given shape, checked exactly; `what` names the shape ("C x C").
  const model::MappedTensor& matrix(const std::string& name, int64_t rows, int64_t cols,
                                    const char* what);
  // A projection [out, in] (see linear_of).
  std::unique_ptr<Linear> linear(const std::string& name, int64_t out, int64_t in,
                                 const char* what);
  // The Linear for a checked [out, in] tensor: packed sb6 / sym projections stay packed; other
  // packed layouts are dequantised once; dense ones are borrowed from the file.
  std::unique_ptr<Linear> linear_of(const model::MappedTensor& t, int64_t out, int64_t in);
  // The embedding table [V, C]: packed sym/sb6 tables are gathered row by row from their codes.
  std::unique_ptr<Embedding> embedding(const model::MappedTensor& t, int64_t rows, int64_t cols);
  // A LoRA factor read as a Linear [out, in] (fp32 unless stored 16-bit). Official files store
  // the transpose ([in, out], applied from the right); Linear-style conventions store [out, in].
  // A factor the Linear holds as a copy (transposed, or widened to fp32) joins copied().
  std::unique_ptr<Linear> lora(const std::string& name, int64_t out, int64_t in, const char* what);
  // The stored bytes of the dense tensors read into copies so far: nothing reads them after the
  // load, so build_model gives their pages of the mapped file back (at 1.5B the official file's
  // LoRA factors are ~100 MB). A view into the checkpoint's bytes.
  const std::vector<ByteRange>& copied() const { return copied_; }

  // Stored names of the tensors nobody read or ignored, and of those the naming left unmapped.
  std::vector<std::string> leftovers() const;
  // Throws CheckpointError naming the leftovers (up to 20), followed by `explanation` (what the
  // reader's tensors may be), when there are any.
  void refuse_leftovers(const std::string& explanation) const;

  // Adds the tensors (all but the ignored ones) to `info`: parameters, weight bytes (packed:
  // their stored buffers), parameters per dtype and per packed layout (merged with what `info`
  // already holds).
  void tally(ModelInfo& info) const;
  // Adds every tensor, in the order of its name, to a weights fingerprint (docs/tasks.md §3.5):
  // dense ones as hash_tensor_record() does; packed ones tagged "rwkvq:<layout>@<bits>" instead
  // of a dtype, with the dequantised fp32 bytes of the small ones.
  void hash_records(base::Sha256& h) const;

  // "'stored'" or "'stored' (official name 'official')", for messages.
  std::string describe(const model::MappedTensor& t, const std::string& official) const;
  // ", in a huggingface-fla checkpoint" for a checkpoint not in the official naming, else "".
  std::string convention_hint() const;
  const model::OfficialNames& names() const { return names_; }
  const std::string& path() const { return path_; }

 private:
  // Refuses NaN or inf among `n` elements of tensor `t`.
  void check_finite(const void* data, DType dtype, int64_t n, const model::MappedTensor& t,
                    const std::string& name) const;
  std::unique_ptr<Linear> borrow(const io::TensorView& v, int64_t out, int64_t in) const;

  model::OfficialNames names_;
  std::string path_;
  std::string complete_;
  std::set<std::string> consumed_, ignored_;
  std::vector<ByteRange> copied_;
  const quant::RwkvqFile* packed_file_ = nullptr;
  std::map<std::string, const quant::QuantTensor*> packed_;  // by stored name
};

}  // namespace wick::model
