// A synthetic reranker head (include/wick/synth.h): the blocks of a one-file synthetic model of
// the base's width, renamed into the head layout, plus a random score MLP.
#include <cmath>
#include <filesystem>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "wick/errors.h"
#include "wick/rng.h"
#include "wick/synth.h"

namespace wick {
namespace {

// N(0, sigma^2) values from a SplitMix64 stream (Box-Muller).
std::vector<float> normal(size_t n, double sigma, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)) * sigma;
    out[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
  return out;
}

std::string_view bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

}  // namespace

void write_synthetic_reranker_head(const std::string& path, const Geometry& base, int n_blocks,
                                   int layer, uint64_t seed) {
  if (n_blocks < 1) throw InputError("synthetic reranker head: expected at least one block");
  if (layer < 0 || layer >= base.n_layer) {
    throw InputError("synthetic reranker head: layer " + std::to_string(layer) +
                     " is outside the base's " + std::to_string(base.n_layer) + " layers");
  }
  if (base.head_size != kSynthHeadSize) {
    throw InputError("synthetic reranker head: the base's head size is " +
                     std::to_string(base.head_size) + "; synthetic heads have head size 64");
  }
  const int64_t C = base.n_embd;
  const std::string blocks_path = path + ".blocks.tmp";
  write_synthetic_checkpoint(blocks_path, make_synth_geometry(n_blocks, static_cast<int>(C), 1),
                             DType::F32, seed);
  std::vector<io::TensorToWrite> tensors;
  std::vector<float> fc1, b1, fc2;
  try {
    const io::TensorSet blocks = io::read_safetensors(io::MappedFile::open(blocks_path));
    for (const io::TensorView& t : blocks.tensors()) {
      if (t.name == "head.weight") continue;
      const std::string name = t.name == "emb.weight" ? "probe" : t.name;
      tensors.push_back({name, t.dtype, t.shape,
                         std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
    fc1 = normal(static_cast<size_t>(C * C), 1.0 / std::sqrt(double(C)), seed ^ 0xf1);
    b1 = normal(static_cast<size_t>(C), 0.1, seed ^ 0xb1);
    fc2 = normal(static_cast<size_t>(C), 1.5 / std::sqrt(double(C)), seed ^ 0xf2);
    tensors.push_back({"score_fc1.weight", DType::F32, {C, C}, bytes_of(fc1)});
    tensors.push_back({"score_fc1.bias", DType::F32, {C}, bytes_of(b1)});
    tensors.push_back({"score_fc2.weight", DType::F32, {1, C}, bytes_of(fc2)});
    std::string layers;
    for (int i = 0; i < n_blocks; ++i) layers += (i ? "," : "") + std::to_string(layer);
    io::write_safetensors(path, tensors,
                          {{"format", "rwkv-metal-reranker-head-v1"},
                           {"layer_idx", layers},
                           {"shared_state", "0"},
                           {"n_probe", "1"},
                           {"head_hidden", ""},
                           {"base_n_layer", std::to_string(base.n_layer)},
                           {"base_n_embd", std::to_string(C)},
                           {"base_n_head", std::to_string(base.n_head)},
                           {"template", "doc_first"},
                           {"terminator", "0"},
                           {"wick.synth", "1"},
                           {"wick.synth.note", "random reranker head for benchmarks"}});
  } catch (...) {
    std::filesystem::remove(blocks_path);
    throw;
  }
  std::filesystem::remove(blocks_path);
}

}  // namespace wick
