// State snapshot files (docs/tasks.md §3.5, P11): bit-exact round trip, continuation, refusal of
// foreign, damaged and other-kind files.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <set>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io/mapped_file.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/state_file.h"
#include "wick/version.h"

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
                      bool drop_cmix = false, const std::set<std::string>& drop = {}) {
    io::TensorSet set = io::read_safetensors(io::MappedFile::open(src));
    std::map<std::string, std::string> meta = set.metadata();
    edit(meta);
    std::vector<io::TensorToWrite> ts;
    for (const io::TensorView& t : set.tensors()) {
      if ((drop_cmix && t.name == "cmix_shift") || drop.count(t.name)) continue;
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
  // The engine that wrote it, as the library names itself (the CLI's --version and the Python
  // package's __version__ read the same wick::version()).
  EXPECT_EQ(l.info.engine_version, "wick " + std::string(version()));
  EXPECT_NE(std::string(version()), "");
  // The layout of §3.5.
  io::TensorSet set = io::read_safetensors(io::MappedFile::open(path));
  const Geometry& g = model_.geometry();
  EXPECT_EQ(set.find("wkv")->shape,
            (std::vector<int64_t>{g.n_layer, 1, g.n_head, g.head_size, g.head_size}));
  EXPECT_EQ(set.find("tmix_shift")->shape, (std::vector<int64_t>{g.n_layer, 1, 1, g.n_embd}));
  EXPECT_EQ(set.metadata().at("wick.state"), "2");
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
  EXPECT_THROW(load_state(rewrite(path, "b.st", [](auto& m) { m["wick.state"] = "3"; }), model_),
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

// Issue 25 item 4: a generation split into 10 + 10 tokens through a state file (format 2: the
// logits after the last absorbed token and the sampler) equals one run of 20, greedy with
// penalties, seeded standard and seeded ChatRWKV sampling alike.
TEST_F(StateFile, AGenerationSplitThroughAFileEqualsTheUninterruptedOne) {
  GenerationConfig greedy;
  greedy.sampling.presence_penalty = 0.7f;
  greedy.sampling.frequency_penalty = 0.3f;
  GenerationConfig seeded;
  seeded.sampling.temperature = 1.f;
  seeded.sampling.top_p = 0.9f;
  seeded.sampling.frequency_penalty = 0.2f;
  seeded.sampling.seed = 11;
  GenerationConfig chatrwkv;
  chatrwkv.sampling = SamplingConfig::chatrwkv_pipeline();
  chatrwkv.sampling.seed = 5;
  int k = 0;
  for (GenerationConfig c : {greedy, seeded, chatrwkv}) {
    SCOPED_TRACE(k);
    c.max_tokens = 20;
    State whole_state = model_.new_state();
    const GenerationResult whole = generate(model_, tok_, "Once upon a time", c, whole_state);
    ASSERT_EQ(whole.tokens.size(), 20u);

    c.max_tokens = 10;
    State first_state = model_.new_state();
    const GenerationResult first = generate(model_, tok_, "Once upon a time", c, first_state);
    ASSERT_EQ(first.continuation.logits.size(), static_cast<size_t>(model_.geometry().vocab));
    ASSERT_TRUE(first.continuation.sampler.has_value());
    const std::string path = (dir_ / ("split" + std::to_string(k++) + ".st")).string();
    StateFileInfo info;
    info.continuation = first.continuation;
    save_state(path, first_state, model_, info);

    LoadedState loaded = load_state(path, model_);
    EXPECT_EQ(loaded.info.continuation.logits, first.continuation.logits);
    EXPECT_EQ(loaded.info.continuation.sampler, first.continuation.sampler);
    const GenerationResult second =
        generate(model_, tok_, "", c, loaded.state, loaded.info.continuation);
    std::vector<int32_t> joined = first.tokens;
    joined.insert(joined.end(), second.tokens.begin(), second.tokens.end());
    EXPECT_EQ(joined, whole.tokens);
    EXPECT_EQ(first.text + second.text, whole.text);
    EXPECT_TRUE(loaded.state == whole_state);
    EXPECT_EQ(second.continuation.logits, whole.continuation.logits);
    EXPECT_EQ(second.continuation.sampler, whole.continuation.sampler);

    // Without the stored sampler (a fresh one at the same seed) sampling draws other tokens.
    if (c.sampling.temperature > 0) {
      Continuation logits_only;
      logits_only.logits = first.continuation.logits;
      State again = load_state(path, model_).state;
      EXPECT_NE(generate(model_, tok_, "", c, again, logits_only).tokens, second.tokens);
    }
  }
}

TEST_F(StateFile, FormatOneFilesStillLoadWithoutAContinuation) {
  GenerationConfig c;
  c.max_tokens = 3;
  State s = model_.new_state();
  const GenerationResult r = generate(model_, tok_, "abc", c, s);
  StateFileInfo info;
  info.continuation = r.continuation;
  const std::string v2 = (dir_ / "v2.st").string();
  save_state(v2, s, model_, info);
  const std::set<std::string> parts = {"logits", "sampler_history_ids", "sampler_history_weights"};
  const std::string v1 = rewrite(
      v2, "v1.st",
      [](auto& m) {
        m["wick.state"] = "1";
        m.erase("sampler_mode");
        m.erase("sampler_rng");
      },
      false, parts);
  const LoadedState l = load_state(v1, model_);
  EXPECT_TRUE(l.state == s);
  EXPECT_FALSE(l.info.continuation.has_logits());
  EXPECT_FALSE(l.info.continuation.sampler.has_value());
  // Version 1 never had the parts: a file claiming it with them is refused.
  EXPECT_THROW(load_state(rewrite(v2, "v1x.st", [](auto& m) { m["wick.state"] = "1"; }), model_),
               StateFileError);
  // An empty prompt needs the logits: refused without them, naming why.
  State t = l.state;
  try {
    generate(model_, tok_, "", c, t, l.info.continuation);
    ADD_FAILURE() << "an empty prompt without logits was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no logits before the first token"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(t == l.state);
}

TEST_F(StateFile, DamagedContinuationPartsAreRefused) {
  GenerationConfig c;
  c.max_tokens = 4;
  c.sampling.presence_penalty = 0.5f;
  State s = model_.new_state();
  const GenerationResult r = generate(model_, tok_, "abc", c, s);
  ASSERT_FALSE(r.continuation.sampler->history.empty());
  StateFileInfo info;
  info.continuation = r.continuation;
  const std::string path = (dir_ / "cont.st").string();
  save_state(path, s, model_, info);
  ASSERT_NO_THROW(load_state(path, model_));
  auto error_of = [&](const std::string& p) -> std::string {
    try {
      load_state(p, model_);
    } catch (const StateFileError& e) {
      return e.what();
    }
    return "loaded";
  };
  // Half a sampler part, a bad RNG text, an unknown mode.
  EXPECT_NE(error_of(rewrite(path, "a.st", [](auto& m) { m.erase("sampler_rng"); }))
                .find("sampler part is incomplete"),
            std::string::npos);
  EXPECT_NE(error_of(rewrite(path, "b.st", [](auto& m) { m["sampler_rng"] = "xyz"; }))
                .find("16 lowercase hex digits"),
            std::string::npos);
  EXPECT_NE(error_of(rewrite(path, "c.st", [](auto& m) { m["sampler_mode"] = "beam"; }))
                .find("sampler_mode"),
            std::string::npos);
  // Logits of another length, NaN logits, history ids out of order, a negative weight.
  io::TensorSet set = io::read_safetensors(io::MappedFile::open(path));
  auto with = [&](const std::string& name, const io::TensorToWrite& replacement) {
    std::vector<io::TensorToWrite> ts;
    for (const io::TensorView& t : set.tensors())
      ts.push_back(t.name == replacement.name
                       ? replacement
                       : io::TensorToWrite{t.name, t.dtype, t.shape,
                                           std::string_view(reinterpret_cast<const char*>(t.data),
                                                            t.nbytes)});
    const std::string out = (dir_ / name).string();
    io::write_safetensors(out, ts, set.metadata());
    return out;
  };
  const std::vector<float> short_logits(10, 0.f);
  EXPECT_NE(error_of(with("d.st", {"logits", DType::F32, {10},
                                   std::string_view(reinterpret_cast<const char*>(short_logits.data()), 40)}))
                .find("tensor 'logits' should be F32 [256]"),
            std::string::npos);
  std::vector<float> nan_logits = r.continuation.logits;
  nan_logits[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(error_of(with("e.st", {"logits", DType::F32, {256},
                                   std::string_view(reinterpret_cast<const char*>(nan_logits.data()),
                                                    nan_logits.size() * 4)}))
                .find("'logits' holds NaN at element 17"),
            std::string::npos);
  const size_t K = r.continuation.sampler->history.size();
  std::vector<int32_t> ids(K, 3);  // repeated ids
  std::vector<float> weights(K, -1.f);
  const std::string e1 = error_of(with(
      "f.st", {"sampler_history_ids", DType::I32, {static_cast<int64_t>(K)},
               std::string_view(reinterpret_cast<const char*>(ids.data()), K * 4)}));
  EXPECT_NE(e1.find(K > 1 ? "not an ascending id" : "loaded"), std::string::npos) << e1;
  EXPECT_NE(error_of(with("g.st", {"sampler_history_weights", DType::F32, {static_cast<int64_t>(K)},
                                   std::string_view(reinterpret_cast<const char*>(weights.data()),
                                                    K * 4)}))
                .find("with a finite weight >= 0"),
            std::string::npos);
  // Saving refuses logits of another model.
  StateFileInfo bad;
  bad.continuation.logits.assign(7, 0.f);
  EXPECT_THROW(save_state((dir_ / "h.st").string(), s, model_, bad), InputError);
}

}  // namespace
}  // namespace wick::test
