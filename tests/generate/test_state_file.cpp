// State snapshot files (docs/tasks.md §3.5, P11): bit-exact round trip, continuation, refusal of
// foreign, damaged and other-kind files.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io/mapped_file.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/state_file.h"

namespace wick::test {
namespace {

class StateFile : public ::testing::Test {
 protected:
  Model model_ = Model::load_default();
  ByteTokenizer tok_;
  std::filesystem::path dir_ = scratch_dir();

  State folded(const std::string& text) const {
    State s = model_.new_state();
    model_.forward(tok_.encode(text), s);
    return s;
  }

  // Rewrites `src` with metadata changed by `edit` (tensors kept).
  std::string rewrite(const std::string& src, const std::string& name,
                      const std::function<void(std::map<std::string, std::string>&)>& edit,
                      bool drop_cmix = false) {
    io::TensorSet set = io::read_safetensors(io::MappedFile::open(src));
    std::map<std::string, std::string> meta = set.metadata();
    edit(meta);
    std::vector<io::TensorToWrite> ts;
    for (const io::TensorView& t : set.tensors()) {
      if (drop_cmix && t.name == "cmix_shift") continue;
      ts.push_back({t.name, t.dtype, t.shape,
                    std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
    const std::string out = (dir_ / name).string();
    io::write_safetensors(out, ts, meta);
    return out;
  }
};

TEST_F(StateFile, RoundTripIsBitExactAndCarriesTheContract) {
  const State s = folded("Once upon a time there was a state.");
  const std::string path = (dir_ / "s.safetensors").string();
  StateFileInfo info;
  info.note = "après le prompt";
  info.tokenizer = "byte-level";
  info.n_tokens = 35;
  save_state(path, s, model_, info);
  const LoadedState l = load_state(path, model_);
  EXPECT_EQ(std::memcmp(l.state.data(), s.data(), s.bytes()), 0);
  EXPECT_TRUE(l.state == s);
  EXPECT_TRUE(l.warnings.empty());
  EXPECT_EQ(l.info.note, "après le prompt");
  EXPECT_EQ(l.info.tokenizer, "byte-level");
  EXPECT_EQ(l.info.n_tokens, 35);
  EXPECT_EQ(l.info.base_fingerprint, model_.info().fingerprint);
  // The layout of §3.5.
  io::TensorSet set = io::read_safetensors(io::MappedFile::open(path));
  const Geometry& g = model_.geometry();
  EXPECT_EQ(set.find("wkv")->shape,
            (std::vector<int64_t>{g.n_layer, 1, g.n_head, g.head_size, g.head_size}));
  EXPECT_EQ(set.find("tmix_shift")->shape, (std::vector<int64_t>{g.n_layer, 1, 1, g.n_embd}));
  EXPECT_EQ(set.metadata().at("wick.state"), "1");
  EXPECT_EQ(set.metadata().at("kind"), "snapshot");
  // A different state gives a different file.
  save_state((dir_ / "t.safetensors").string(), folded("Another text."), model_, info);
  EXPECT_NE(read_file(dir_ / "t.safetensors"), read_file(path));
}

TEST_F(StateFile, ContinuationFromTheLoadedStateIsBitIdentical) {
  const State s = folded("The state file keeps ");
  const std::string path = (dir_ / "c.safetensors").string();
  save_state(path, s, model_);
  State mem = s;
  State disk = load_state(path, model_).state;
  const std::vector<int32_t> more = tok_.encode("the context.");
  EXPECT_EQ(model_.forward(more, mem), model_.forward(more, disk));
  EXPECT_EQ(model_.step(7, mem), model_.step(7, disk));
  EXPECT_TRUE(mem == disk);
}

TEST_F(StateFile, SampledGenerationResumedFromAFileEqualsTheUninterruptedOne) {
  GenerationConfig c;
  c.max_tokens = 12;
  c.sampling.temperature = 1.f;
  c.sampling.top_p = 0.9f;
  c.sampling.seed = 9;
  State live = model_.new_state();
  generate(model_, tok_, "First part of the story: ", c, live);
  const std::string path = (dir_ / "r.safetensors").string();
  save_state(path, live, model_);
  c.sampling.seed = 10;
  const GenerationResult uninterrupted = generate(model_, tok_, " and then", c, live);
  State resumed = load_state(path, model_).state;
  const GenerationResult from_file = generate(model_, tok_, " and then", c, resumed);
  EXPECT_EQ(from_file.tokens, uninterrupted.tokens);
  EXPECT_EQ(from_file.text, uninterrupted.text);
  EXPECT_TRUE(resumed == live);
  State zero = model_.new_state();
  EXPECT_NE(generate(model_, tok_, " and then", c, zero).tokens, uninterrupted.tokens);
}

TEST_F(StateFile, AStateFromOtherWeightsIsRefusedUnlessAllowed) {
  const std::string path = (dir_ / "o.safetensors").string();
  save_state(path, folded("abc"), model_);
  // Same geometry, other weights: the .pth of the same model has another fingerprint only if its
  // bytes differ, so change one small tensor explicitly.
  io::TensorSet base = io::read_safetensors(
      io::MappedFile::open(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors")));
  std::vector<std::string> keep;
  std::vector<io::TensorToWrite> ts;
  std::string changed;
  for (const io::TensorView& t : base.tensors()) {
    std::string_view bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (t.name == "ln_out.weight") {
      changed.assign(bytes);
      changed[0] ^= 1;
      bytes = changed;
    }
    ts.push_back({t.name, t.dtype, t.shape, bytes});
  }
  const std::string other_path = (dir_ / "other.safetensors").string();
  io::write_safetensors(other_path, ts, base.metadata());
  const Model other = Model::load(other_path);
  ASSERT_EQ(other.geometry(), model_.geometry());
  EXPECT_NE(other.info().fingerprint, model_.info().fingerprint);
  try {
    load_state(path, other);
    ADD_FAILURE() << "a foreign state was accepted";
  } catch (const StateFileError& e) {
    EXPECT_NE(std::string(e.what()).find("allow_other_base"), std::string::npos) << e.what();
  }
  const LoadedState l = load_state(path, other, /*allow_other_base=*/true);
  EXPECT_EQ(l.warnings.size(), 1u);
  EXPECT_TRUE(l.state == folded("abc"));
  // Geometry mismatch is always refused, even when other weights are allowed.
  const Model h4 = Model::load(fixture("tiny-rwkv7/tiny-rwkv7-834K-h4.safetensors"));
  EXPECT_THROW(load_state(path, h4, true), StateFileError);
}

TEST_F(StateFile, DamagedForeignAndOtherKindFilesAreRefused) {
  const std::string path = (dir_ / "d.safetensors").string();
  save_state(path, folded("abc"), model_);
  const std::string bytes = read_file(path);
  // Truncated.
  write_file(dir_ / "trunc.safetensors", bytes.substr(0, bytes.size() - 100));
  EXPECT_THROW(load_state((dir_ / "trunc.safetensors").string(), model_), FormatError);
  // Not a state file at all: a model checkpoint.
  EXPECT_THROW(load_state(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"), model_), StateFileError);
  // No wick.state key, another version, another kind, a lying geometry, a missing tensor.
  EXPECT_THROW(load_state(rewrite(path, "a.st", [](auto& m) { m.erase("wick.state"); }), model_),
               StateFileError);
  EXPECT_THROW(load_state(rewrite(path, "b.st", [](auto& m) { m["wick.state"] = "2"; }), model_),
               StateFileError);
  EXPECT_THROW(load_state(rewrite(path, "c.st", [](auto& m) { m["kind"] = "docindex"; }), model_),
               StateFileError);
  EXPECT_THROW(load_state(rewrite(path, "d.st", [](auto& m) { m["n_layer"] = "3"; }), model_),
               StateFileError);
  EXPECT_THROW(load_state(rewrite(path, "e.st", [](auto&) {}, /*drop_cmix=*/true), model_),
               StateFileError);
  EXPECT_THROW(load_state(rewrite(path, "f.st", [](auto& m) { m.erase("base_fingerprint"); }), model_),
               StateFileError);
  EXPECT_NO_THROW(load_state(rewrite(path, "g.st", [](auto&) {}), model_));
  EXPECT_THROW(load_state((dir_ / "missing.safetensors").string(), model_), FileError);
}

// NaN or inf in a loaded state used to show only later, as "sampler: every logit is -inf or
// NaN"; the file is now refused on load, naming the tensor.
TEST_F(StateFile, NonFiniteValuesAreRefusedOnLoadNamingTheTensor) {
  auto error_of = [&](const std::string& path) -> std::string {
    try {
      load_state(path, model_);
    } catch (const StateFileError& e) {
      return e.what();
    }
    return "loaded";
  };
  State s = folded("abc");
  s.wkv(1)[5] = std::numeric_limits<float>::quiet_NaN();
  const std::string nan_path = (dir_ / "nan.safetensors").string();
  save_state(nan_path, s, model_);
  const std::string e = error_of(nan_path);
  EXPECT_NE(e.find("tensor 'wkv' holds NaN at element " +
                   std::to_string(s.wkv_size() + 5)),
            std::string::npos) << e;
  EXPECT_NE(e.find(nan_path), std::string::npos) << e;
  State t = folded("abc");
  t.att_shift(0)[3] = -std::numeric_limits<float>::infinity();
  const std::string inf_path = (dir_ / "inf.safetensors").string();
  save_state(inf_path, t, model_);
  EXPECT_NE(error_of(inf_path).find("tensor 'tmix_shift' holds an infinity at element 3"),
            std::string::npos) << error_of(inf_path);
}

}  // namespace
}  // namespace wick::test
