// Shared models of the fuzz targets.
#include "fuzz/fuzz_models.h"

#include <unistd.h>

#include <filesystem>

#include "fuzz/fuzz_target.h"
#include "wick/state.h"
#include "wick/synth.h"

namespace wick::fuzz {

const Model& tiny_model() {
  static const Model m = Model::load_default();
  return m;
}

std::shared_ptr<const Tokenizer> byte_tokenizer() {
  static const std::shared_ptr<const Tokenizer> t = default_tokenizer_for_vocab(256);
  return t;
}

namespace {

struct Folder {
  std::string path;
  Folder() {
    const char* tmp = std::getenv("TMPDIR");
    path = (std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
            ("wick-fuzz-models-" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

const std::string& scratch_folder() {
  static const Folder f;
  return f.path;
}

const Model& rwkvx_model() {
  static const Model m = [] {
    const std::string path = scratch_folder() + "/rwkvx.safetensors";
    write_synthetic_checkpoint(path, make_synth_geometry(2, 64, 256, 1), DType::F32, 3);
    return Model::load(path);
  }();
  return m;
}

void check_model_file(const std::string& path) {
  const Model m = Model::load(path);
  const Geometry& g = m.geometry();
  WICK_FUZZ_EXPECT(g.n_layer > 0 && g.n_embd > 0 && g.vocab > 0 && g.n_head * g.head_size == g.n_embd,
                   "a loaded model with an inconsistent geometry");
  if (!m.has_lm_head()) return;
  State s = m.new_state();
  const int32_t ids[2] = {0, g.vocab - 1};
  const std::vector<float> logits = m.forward(std::span<const int32_t>(ids, 2), s);
  WICK_FUZZ_EXPECT(logits.size() == static_cast<size_t>(g.vocab), "forward's logits size");
  WICK_FUZZ_EXPECT(m.step(1 % g.vocab, s).size() == static_cast<size_t>(g.vocab),
                   "step's logits size");
}

}  // namespace wick::fuzz
