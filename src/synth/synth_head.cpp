// A synthetic reranker head (include/wick/synth.h): the blocks of a one-file synthetic model of
// the base's width, renamed into the head layout, plus a random score MLP.
#include <cmath>
#include <filesystem>
#include <list>
#include <map>
#include <optional>

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

// rwkv-metal's name of an official block tensor (docs/tasks.md §5.4); nullopt = not in a head.
std::optional<std::string> head_name(const std::string& official) {
  if (official == "emb.weight") return "probe";
  if (official == "head.weight") return std::nullopt;
  if (official.rfind("ln_out.", 0) == 0) return official;
  if (official.rfind("blocks.0.ln0.", 0) == 0) return "ln0." + official.substr(13);
  const size_t dot = official.find('.', 7);
  const std::string prefix = official.substr(0, dot + 1);  // "blocks.i."
  const std::string rest = official.substr(dot + 1);
  if (prefix == "blocks.0." && (rest == "att.v0" || rest == "att.v1" || rest == "att.v2"))
    return std::nullopt;  // unused by block 0
  if (rest.rfind("ln1.", 0) == 0 || rest.rfind("ln2.", 0) == 0) return official;
  if (rest.rfind("ffn.", 0) == 0) return prefix + "cmix." + rest.substr(4);
  static const std::map<std::string, std::string> kAtt = {{"receptance.weight", "r_proj.weight"},
                                                          {"key.weight", "k_proj.weight"},
                                                          {"value.weight", "v_proj.weight"},
                                                          {"output.weight", "o_proj.weight"},
                                                          {"w1", "w_lora_A.weight"},
                                                          {"w2", "w_lora_B.weight"},
                                                          {"w0", "w_lora_B.bias"},
                                                          {"a1", "a_lora_A.weight"},
                                                          {"a2", "a_lora_B.weight"},
                                                          {"a0", "a_lora_B.bias"},
                                                          {"v1", "v_lora_A.weight"},
                                                          {"v2", "v_lora_B.weight"},
                                                          {"v0", "v_lora_B.bias"},
                                                          {"g1", "g_lora_A.weight"},
                                                          {"g2", "g_lora_B.weight"}};
  const std::string att = rest.substr(4);  // after "att."
  auto it = kAtt.find(att);
  return prefix + "tmix." + (it == kAtt.end() ? att : it->second);
}

// att.{w,a,v,g}{1,2}: stored [in, out] in official files, [out, in] in rwkv-metal's.
bool is_lora_factor(const std::string& official) {
  const size_t n = official.size();
  if (n < 7 || official.compare(n - 7, 5, ".att.") != 0) return false;
  const char kind = official[n - 2], index = official[n - 1];
  return (kind == 'w' || kind == 'a' || kind == 'v' || kind == 'g') &&
         (index == '1' || index == '2');
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
  std::list<std::vector<float>> owned;  // transposed LoRA factors (stable addresses)
  std::vector<float> fc1, b1, fc2;
  try {
    const io::TensorSet blocks = io::read_safetensors(io::MappedFile::open(blocks_path));
    for (const io::TensorView& t : blocks.tensors()) {
      std::optional<std::string> name = head_name(t.name);
      if (!name) continue;
      const bool lora = is_lora_factor(t.name);
      if (lora) {  // official [in, out] -> nn.Linear [out, in]
        std::vector<float> v = io::to_f32(t);
        const int64_t r = t.shape[0], c = t.shape[1];
        std::vector<float> tr(v.size());
        for (int64_t i = 0; i < r; ++i)
          for (int64_t j = 0; j < c; ++j) tr[j * r + i] = v[i * c + j];
        owned.push_back(std::move(tr));
        tensors.push_back({*name, DType::F32, {c, r}, bytes_of(owned.back())});
      } else {
        tensors.push_back({*name, t.dtype, t.shape,
                           std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
      }
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
