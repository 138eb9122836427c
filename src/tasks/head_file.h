// Reading the small task-head checkpoints (reranker heads, embedding heads): open a safetensors
// or .pth file and take its tensors as checked fp32 copies, with errors that name the file, the
// tensor, what was expected and what was found.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/tensor_set.h"

namespace wick::tasks {

// The tensors (and safetensors metadata; for .pth, non-tensor values as JSON text) of a head
// file, read through io::read_tensor_file (io/checkpoint.h). Throws FileError / FormatError /
// UnsafePickleError from the container readers, CheckpointError for a foreign container (GGUF,
// ggml, legacy torch.save) or a file that is neither a zip nor safetensors.
io::TensorSet read_head_file(const std::string& path);

// fp32 copy of `name`, which must hold `numel` elements (any nominal shape). Throws
// CheckpointError when the tensor is missing, not F32/F16/BF16, or of another size.
std::vector<float> head_vector(const io::TensorSet& set, const std::string& name, int64_t numel,
                               const std::string& what);
// fp32 copy of the 2-D tensor `name` of shape [rows, cols]; throws CheckpointError otherwise.
std::vector<float> head_matrix(const io::TensorSet& set, const std::string& name, int64_t rows,
                               int64_t cols, const std::string& what);
// The shape of `name`; throws CheckpointError when it is missing.
const std::vector<int64_t>& head_shape(const io::TensorSet& set, const std::string& name);

// A metadata value; nullopt when absent.
std::optional<std::string> meta(const io::TensorSet& set, const std::string& key);
// An integer metadata value: nullopt when absent or empty; throws CheckpointError when it does not
// parse as an integer.
std::optional<int64_t> meta_int(const io::TensorSet& set, const std::string& key);

}  // namespace wick::tasks
