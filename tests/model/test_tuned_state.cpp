// State-tuned initial states (wick/tuned_state.h, docs/serving.md §6.1): RWKV-PEFT time_state
// files, .pth and safetensors, taken as the WKV part of the initial state without a transpose.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "io/safetensors_writer.h"
#include "pth_writer.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/perplexity.h"
#include "wick/state_file.h"
#include "wick/tuned_state.h"

namespace wick {
namespace {

struct Layer {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string f32_bytes(const float* p, size_t n) {
  return std::string(reinterpret_cast<const char*>(p), n * sizeof(float));
}

std::string bf16_bytes(const float* p, size_t n) {
  std::string out(n * 2, '\0');
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = base::f32_to_bf16(p[i]);
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}

class TunedState : public ::testing::Test {
 protected:
  // A state with non-trivial WKV matrices: the model after some tokens.
  void SetUp() override {
    const std::vector<int32_t> ids = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
    trained_ = model_.new_state();
    model_.forward(ids, trained_);
    // The state a tuning file holds: the WKV matrices, zero shifts.
    expected_ = model_.new_state();
    for (int i = 0; i < L(); ++i)
      std::memcpy(expected_.wkv(i), trained_.wkv(i), wkv_floats() * sizeof(float));
  }

  int L() const { return trained_.n_layer(); }
  int H() const { return trained_.n_head(); }
  int N() const { return trained_.head_size(); }
  size_t wkv_floats() const { return static_cast<size_t>(H()) * N() * N(); }

  // One time_state per layer of `s` (transposed per head when asked, the x060 convention).
  std::vector<Layer> layers(const State& s, bool transpose = false, DType dtype = DType::F32) {
    std::vector<Layer> out;
    for (int i = 0; i < L(); ++i) {
      std::vector<float> m(s.wkv(i), s.wkv(i) + wkv_floats());
      if (transpose)
        for (int h = 0; h < H(); ++h)
          for (int r = 0; r < N(); ++r)
            for (int c = 0; c < N(); ++c)
              m[(static_cast<size_t>(h) * N() + r) * N() + c] =
                  s.wkv(i)[(static_cast<size_t>(h) * N() + c) * N() + r];
      out.push_back({"blocks." + std::to_string(i) + ".att.time_state", dtype, {H(), N(), N()},
                     dtype == DType::BF16 ? bf16_bytes(m.data(), m.size())
                                          : f32_bytes(m.data(), m.size())});
    }
    return out;
  }

  std::string write_st(const std::vector<Layer>& ls, const std::string& name,
                       const std::map<std::string, std::string>& meta = {}) {
    std::vector<io::TensorToWrite> t;
    for (const Layer& l : ls) t.push_back({l.name, l.dtype, l.shape, l.bytes});
    const std::string path = (dir_ / name).string();
    io::write_safetensors(path, t, meta);
    return path;
  }

  std::string write_pth(const std::vector<Layer>& ls, const std::string& name) {
    std::vector<test::pth::PthTensor> t;
    for (const Layer& l : ls) t.push_back({l.name, l.dtype, l.shape, l.bytes});
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(test::pth::write_pth(path, t));
    return path;
  }

  // The logits of a continuation from `s` (a copy).
  std::vector<float> continue_from(State s) {
    const std::vector<int32_t> next = {84, 104, 101, 32, 101, 110, 100};
    return model_.forward(next, s);
  }

  std::string refusal(const std::string& path) {
    try {
      load_tuned_state(path, model_);
    } catch (const StateFileError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no StateFileError for " << path;
    return {};
  }

  Model model_ = Model::load_default();
  State trained_, expected_;
  std::filesystem::path dir_ = test::scratch_dir();
};

TEST_F(TunedState, SafetensorsAndPthGiveTheWkvWithZeroShifts) {
  const std::string st = write_st(layers(trained_), "tuned.safetensors");
  const std::string pth = write_pth(layers(trained_), "tuned.pth");
  for (const std::string& path : {st, pth}) {
    SCOPED_TRACE(path);
    const State s = load_tuned_state(path, model_);
    EXPECT_TRUE(s == expected_);
    for (int i = 0; i < L(); ++i) {
      for (int c = 0; c < s.n_embd(); ++c) {
        ASSERT_EQ(s.att_shift(i)[c], 0.0f);
        ASSERT_EQ(s.ffn_shift(i)[c], 0.0f);
      }
    }
    // It continues exactly as the state it was written from, with zero shifts.
    EXPECT_EQ(continue_from(s), continue_from(expected_));
  }
  // The shifts matter (the test can tell): the trained state with its shifts continues otherwise.
  EXPECT_NE(continue_from(trained_), continue_from(expected_));
}

TEST_F(TunedState, NoTransposeForX070) {
  // A file written with the x060 (transposed) convention gives another state and other logits:
  // the loader must take the matrices as stored.
  const State t = load_tuned_state(write_st(layers(trained_, true), "t.safetensors"), model_);
  EXPECT_FALSE(t == expected_);
  EXPECT_NE(continue_from(t), continue_from(expected_));
}

TEST_F(TunedState, Bf16FilesWidenExactly) {
  const std::string pth = write_pth(layers(trained_, false, DType::BF16), "bf16.pth");
  const std::string st = write_st(layers(trained_, false, DType::BF16), "bf16.safetensors");
  State rounded = expected_;
  for (int i = 0; i < L(); ++i) base::round_to_bf16(rounded.wkv(i), rounded.wkv(i), wkv_floats());
  EXPECT_TRUE(load_tuned_state(pth, model_) == rounded);
  EXPECT_TRUE(load_tuned_state(st, model_) == rounded);
  EXPECT_FALSE(rounded == expected_);  // bf16 rounding is visible on these values
}

TEST_F(TunedState, RefusesFilesThatDoNotFit) {
  std::vector<Layer> ls = layers(trained_);
  // A layer missing.
  std::vector<Layer> fewer(ls.begin(), ls.end() - 1);
  EXPECT_NE(refusal(write_st(fewer, "fewer.safetensors")).find("is missing"), std::string::npos);
  // A layer beyond the model.
  std::vector<Layer> more = ls;
  more.push_back(ls.back());
  more.back().name = "blocks." + std::to_string(L()) + ".att.time_state";
  EXPECT_NE(refusal(write_st(more, "more.safetensors")).find("the model has"), std::string::npos);
  // Another H*N: the same bytes as [H*N/2 ... ] do not fit the model's heads.
  std::vector<Layer> shape = ls;
  shape[0].shape = {2 * H(), N() / 2, N()};
  EXPECT_NE(refusal(write_st(shape, "shape.safetensors")).find("heads need"), std::string::npos);
  // Another tensor (a LoRA factor) in the file.
  std::vector<Layer> lora = ls;
  lora.push_back({"blocks.0.att.key.lora_A", DType::F32, {1, 4}, std::string(16, '\0')});
  EXPECT_NE(refusal(write_st(lora, "lora.safetensors")).find("--lora"), std::string::npos);
  // A non-finite value.
  std::vector<Layer> inf = ls;
  const float big = std::numeric_limits<float>::infinity();
  std::memcpy(&inf[1].bytes[8], &big, 4);
  EXPECT_NE(refusal(write_st(inf, "inf.safetensors")).find("infinity"), std::string::npos);
  // A wick state file is not a tuning file (and says where it goes).
  const std::string wick_state = (dir_ / "wick.state").string();
  save_state(wick_state, trained_, model_);
  EXPECT_NE(refusal(wick_state).find("--load-state"), std::string::npos);
  // The model's own state still loads from the good file.
  EXPECT_TRUE(load_tuned_state(write_st(ls, "good.safetensors"), model_) == expected_);
}

TEST_F(TunedState, LoadAnyStateTellsTheKinds) {
  const std::string tuned = write_pth(layers(trained_), "any.pth");
  const std::string saved = (dir_ / "saved.state").string();
  save_state(saved, trained_, model_);
  EXPECT_TRUE(is_tuned_state_file(tuned));
  EXPECT_FALSE(is_tuned_state_file(saved));
  EXPECT_FALSE(is_tuned_state_file((dir_ / "absent").string()));
  EXPECT_TRUE(load_any_state(tuned, model_).state == expected_);
  EXPECT_EQ(load_any_state(tuned, model_).info.n_tokens, 0);
  EXPECT_TRUE(load_any_state(saved, model_).state == trained_);
}

TEST_F(TunedState, PerplexityFromTheInitialState) {
  std::vector<std::vector<int32_t>> windows = {{72, 101, 108, 108, 111, 32, 116, 104, 101, 114}};
  const PerplexityResult zero = perplexity(model_, windows);
  const PerplexityResult tuned = perplexity(model_, windows, ScoringPass::kParallel, {}, &expected_);
  const PerplexityResult tuned_rec =
      perplexity(model_, windows, ScoringPass::kRecurrent, {}, &expected_);
  EXPECT_NE(zero.mean_nll, tuned.mean_nll);
  EXPECT_EQ(tuned.mean_nll, tuned_rec.mean_nll);
  State other(1, 64, 1, 64);
  EXPECT_THROW(perplexity(model_, windows, ScoringPass::kParallel, {}, &other), InputError);
}

TEST_F(TunedState, CliInitState) {
  const std::string f = write_pth(layers(trained_), "cli.pth");
  const std::string q = test::shell_quote(f);
  // wick logits --init-state equals the library's continuation from the tuned state.
  const test::CliRun with = test::run_wick("logits --tokens 84,104,101 --init-state " + q);
  const test::CliRun without = test::run_wick("logits --tokens 84,104,101");
  ASSERT_EQ(with.status, 0) << with.err;
  ASSERT_EQ(without.status, 0) << without.err;
  EXPECT_NE(with.out, without.out);
  const test::CliRun rec = test::run_wick("logits --recurrent --tokens 84,104,101 --init-state " + q);
  EXPECT_EQ(rec.out, with.out);
  // generate: starts from it; with --load-state it is an error.
  const test::CliRun gen = test::run_wick(
      "generate --prompt 'Hi' --max-tokens 8 --temperature 0 --json --init-state " + q);
  const test::CliRun plain =
      test::run_wick("generate --prompt 'Hi' --max-tokens 8 --temperature 0 --json");
  ASSERT_EQ(gen.status, 0) << gen.err;
  EXPECT_NE(gen.out, plain.out);
  const std::string saved = (dir_ / "s.state").string();
  save_state(saved, trained_, model_);
  const test::CliRun both = test::run_wick("generate --prompt 'Hi' --init-state " + q +
                                           " --load-state " + test::shell_quote(saved));
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.err.find("use one"), std::string::npos) << both.err;
  // ppl: every window from the tuned state (another perplexity; named in the JSON).
  const auto text = dir_ / "text.txt";
  test::write_file(text, "The quick brown fox jumps over the lazy dog. The end of the text.");
  const std::string ppl = "ppl --ctx 16 --json --text " + test::shell_quote(text.string());
  const test::CliRun ppl_tuned = test::run_wick(ppl + " --init-state " + q);
  const test::CliRun ppl_zero = test::run_wick(ppl);
  ASSERT_EQ(ppl_tuned.status, 0) << ppl_tuned.err;
  const auto jt = nlohmann::json::parse(ppl_tuned.out), jz = nlohmann::json::parse(ppl_zero.out);
  EXPECT_NE(jt["mean_nll"], jz["mean_nll"]);
  EXPECT_EQ(jt["init_state"], f);
  EXPECT_TRUE(jz["init_state"].is_null());
  // A file for another model is refused with its reason.
  std::vector<Layer> fewer = layers(trained_);
  fewer.pop_back();
  const test::CliRun bad = test::run_wick("logits --tokens 1 --init-state " +
                                          test::shell_quote(write_pth(fewer, "fewer.pth")));
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("is missing"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace wick
