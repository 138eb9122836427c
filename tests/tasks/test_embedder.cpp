// The embedder against ../shared/fixtures/tasks (docs/tasks.md §6): EmbeddingRWKV task heads
// with EOS-mean pooling, SwiftRWKV / rwkv-metal heads with last / mean pooling and truncation,
// no-head vectors, independence from neighbours, refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "io/mapped_file.h"
#include "io/pth.h"
#include "io/safetensors_writer.h"
#include "test_util.h"
#include "wick/embed.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/synth.h"
#include "wick/tokenizer.h"

namespace wick {
namespace {

using test::fixture;
using test::floats;
using test::ints;
using test::load_fixture_tensors;

struct EmbedFixture {
  std::string checkpoint = fixture("tasks/er_emb_model.pth");
  Model base = Model::load(checkpoint);
  std::shared_ptr<const Tokenizer> tok =
      load_world_tokenizer(fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  std::vector<std::string> texts =
      nlohmann::json::parse(test::read_file(fixture("tasks/texts.json")))["embed_texts"]
          .get<std::vector<std::string>>();
};

EmbedFixture& fx() {
  static EmbedFixture* f = new EmbedFixture();
  return *f;
}

std::vector<float> l2(std::vector<float> v, int64_t C) {
  for (size_t r = 0; r < v.size() / C; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += double(v[r * C + c]) * v[r * C + c];
    for (int64_t c = 0; c < C; ++c) v[r * C + c] = float(v[r * C + c] / std::sqrt(ss + 1e-12));
  }
  return v;
}

// Smallest cosine between matching rows of two [N, C] normalised matrices.
double min_cosine(const std::vector<float>& a, const std::vector<float>& b, int64_t C) {
  double worst = 1;
  for (size_t r = 0; r < a.size() / C; ++r) {
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += double(a[r * C + c]) * b[r * C + c];
    worst = std::min(worst, s);
  }
  return worst;
}

TEST(Embedder, EmbeddingRwkvTaskHeadsMatchThePackage) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/er_embed_ref.safetensors");
  const Embedder retr = Embedder::embedding_rwkv(f.base, f.tok, f.checkpoint, EmbedTask::kRetrieval);
  for (size_t i = 0; i < f.texts.size(); ++i)
    EXPECT_EQ(retr.tokens(f.texts[i]), ints(ref, "tokens." + std::to_string(i))) << i;
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& t : f.texts) ids.push_back(retr.tokens(t));
  EXPECT_LE(test::max_abs_diff(retr.pooled(ids), floats(ref, "pooled")), 1e-4);
  const std::vector<float> vr = retr.embed(f.texts);
  std::vector<std::vector<float>> per_task;
  for (auto [task, name] : {std::pair{EmbedTask::kRetrieval, "retr"},
                            {EmbedTask::kSimilarity, "sts"},
                            {EmbedTask::kClassification, "cls"}}) {
    const Embedder e = Embedder::embedding_rwkv(f.base, f.tok, f.checkpoint, task);
    const std::vector<float> v = e.embed(f.texts);
    const std::vector<float> want = l2(floats(ref, name), 64);
    std::printf("[parity] EmbeddingRWKV %s vectors: max-abs %.3g, min cosine %.9f\n", name,
                test::max_abs_diff(v, want), min_cosine(v, want, 64));
    EXPECT_LE(test::max_abs_diff(v, want), 1e-5) << name;
    EXPECT_GE(min_cosine(v, want, 64), 0.99999) << name;
    per_task.push_back(v);
  }
  EXPECT_EQ(per_task[0], vr);
  EXPECT_GT(test::max_abs_diff(per_task[0], per_task[1]), 1e-2);  // the heads differ
  EXPECT_GT(test::max_abs_diff(per_task[1], per_task[2]), 1e-2);
  // Two EOS positions: the mean over both.
  const std::vector<int32_t> two = ints(ref, "two_eos.tokens");
  const std::vector<std::vector<int32_t>> two_ids = {two};
  EXPECT_LE(test::max_abs_diff(retr.pooled(two_ids), floats(ref, "two_eos.pooled")), 1e-4);
  EXPECT_LE(test::max_abs_diff(retr.embed_tokens(two_ids), l2(floats(ref, "two_eos.retr"), 64)), 1e-5);
  // Every hidden state of text 0.
  State s = f.base.new_state();
  EXPECT_LE(test::max_abs_diff(f.base.hidden(ids[0], s, true), floats(ref, "hidden.0")), 1e-4);
  // A token list without EOS is refused.
  const std::vector<std::vector<int32_t>> no_eos = {{33155, 40213}};
  EXPECT_THROW(retr.embed_tokens(no_eos), InputError);
}

TEST(Embedder, HeadFilesOfBothLayoutsMatchTheReferences) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/rm_embed_ref.safetensors");
  const Embedder swift = Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_swift.safetensors"));
  EXPECT_EQ(swift.contract().pooling, Pooling::kLast);
  EXPECT_EQ(swift.contract().max_tokens, 512);
  for (size_t i = 0; i < f.texts.size(); ++i)
    EXPECT_EQ(swift.tokens(f.texts[i]), ints(ref, "tokens." + std::to_string(i))) << i;
  const std::vector<float> v = swift.embed(f.texts);
  std::printf("[parity] rwkv-metal embedding head_last: max-abs %.3g, min cosine %.9f\n",
              test::max_abs_diff(v, floats(ref, "head_last")), min_cosine(v, floats(ref, "head_last"), 64));
  EXPECT_LE(test::max_abs_diff(v, floats(ref, "head_last")), 1e-5);
  EXPECT_GE(min_cosine(v, floats(ref, "head_last"), 64), 0.99999);
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& t : f.texts) ids.push_back(swift.tokens(t));
  EXPECT_LE(test::max_abs_diff(swift.pooled(ids), floats(ref, "pooled_last")), 1e-4);

  // rwkv-metal's names carry no contract: strict refuses, non-strict with a contract loads.
  EXPECT_THROW(Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_py.safetensors")),
               CheckpointError);
  // ... and non-strict without a pooling is refused too (no explicit contract).
  EXPECT_THROW(Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_py.safetensors"),
                                   false),
               CheckpointError);
  const Embedder py = Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_py.safetensors"),
                                          false, {Pooling::kLast, std::nullopt});
  EXPECT_EQ(py.embed(f.texts), v);
  const Embedder py_mean = Embedder::with_head(
      f.base, f.tok, fixture("tasks/rm_embed_head_py.safetensors"), false, {Pooling::kMean, std::nullopt});
  EXPECT_LE(test::max_abs_diff(py_mean.embed(f.texts), floats(ref, "head_mean")), 1e-5);
  // The Swift file says pooling = last: asking for mean is refused; a token limit applies.
  EXPECT_THROW(Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_swift.safetensors"),
                                   true, {Pooling::kMean, std::nullopt}),
               CheckpointError);
  const Embedder swift8 = Embedder::with_head(
      f.base, f.tok, fixture("tasks/rm_embed_head_swift.safetensors"), true, {std::nullopt, 8});
  EXPECT_EQ(swift8.contract().max_tokens, 8);
  EXPECT_EQ(swift8.contract().pooling, Pooling::kLast);
  EXPECT_LE(test::max_abs_diff(swift8.embed(f.texts), floats(ref, "head_last_max8")), 1e-5);
  EmbedContract mean;
  mean.pooling = Pooling::kMean;

  // No head: L2(pooled).
  const Embedder plain = Embedder::plain(f.base, f.tok);
  EXPECT_FALSE(plain.has_head());
  EXPECT_LE(test::max_abs_diff(plain.embed(f.texts), floats(ref, "nohead_last")), 1e-5);
  const Embedder plain_mean = Embedder::plain(f.base, f.tok, mean);
  EXPECT_LE(test::max_abs_diff(plain_mean.embed(f.texts), floats(ref, "nohead_mean")), 1e-5);
}

TEST(Embedder, TruncationKeepsTheHeadAndTheTerminator) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/rm_embed_ref.safetensors");
  const Embedder e = Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_py.safetensors"),
                                         false, {Pooling::kLast, 8});
  for (size_t i = 0; i < f.texts.size(); ++i)
    EXPECT_EQ(e.tokens(f.texts[i]), ints(ref, "tokens_max8." + std::to_string(i))) << i;
  EXPECT_LE(test::max_abs_diff(e.embed(f.texts), floats(ref, "head_last_max8")), 1e-5);
  // EmbeddingRWKV never truncates: a limit refuses longer texts and says so.
  const Embedder er = Embedder::embedding_rwkv(f.base, f.tok, f.checkpoint, EmbedTask::kRetrieval, 8);
  try {
    er.embed(f.texts);
    FAIL() << "expected a length error";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("does not truncate"), std::string::npos) << err.what();
  }
}

TEST(Embedder, DefaultLimitIs512TokensKeepingTheHead) {
  const auto& f = fx();
  const Embedder e = Embedder::plain(f.base, f.tok);
  std::string long_text;
  while (f.tok->encode(long_text).size() < 700) long_text += f.texts[0] + " ";
  const std::vector<int32_t> ids = e.tokens(long_text);
  ASSERT_EQ(ids.size(), 512u);
  EXPECT_EQ(ids.back(), 0);  // the terminator stays last
  const std::vector<int32_t> full = f.tok->encode(long_text);
  EXPECT_TRUE(std::equal(ids.begin(), ids.end() - 1, full.begin()));
  // Ids outside the vocabulary are refused before any pass, naming the text.
  const std::vector<std::vector<int32_t>> bad = {{1, 2, 0}, {5, 70000, 0}};
  try {
    e.embed_tokens(bad);
    FAIL() << "expected an id error";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("text 1"), std::string::npos) << err.what();
  }
}

TEST(Embedder, LastPoolingDoesNotDependOnNeighboursAndRunsOnAQuantisedModel) {
  const auto& f = fx();
  const Embedder e = Embedder::with_head(f.base, f.tok, fixture("tasks/rm_embed_head_swift.safetensors"));
  const std::vector<float> all = e.embed(f.texts, 11);
  for (size_t i = 0; i < f.texts.size(); ++i) {
    const std::vector<std::string> one = {f.texts[i]};
    EXPECT_EQ(e.embed(one), std::vector<float>(all.begin() + i * 64, all.begin() + (i + 1) * 64));
  }
  // The same task code on a .rwkvq model (the one weight-access path): the fixture model
  // quantised with rwkv-quant's reduction preset gives vectors close to the dense ones.
  const Model dense = Model::load(fixture("rwkvq/tiny_world_dense.safetensors"));
  const Model packed = Model::load(fixture("rwkvq/tiny_reduction.rwkvq"));
  const std::vector<std::string> texts = {"hello world", "a second text", "xyz"};
  const auto bytes = std::make_shared<ByteTokenizer>();  // vocabulary 256
  const std::vector<float> vd = Embedder::plain(dense, bytes).embed(texts);
  const std::vector<float> vq = Embedder::plain(packed, bytes).embed(texts);
  const int C = dense.geometry().n_embd;
  for (size_t i = 0; i < texts.size(); ++i) {
    const float cos = cosine_of_normalised(std::span(vd).subspan(i * C, C),
                                           std::span(vq).subspan(i * C, C));
    EXPECT_GT(cos, 0.99f) << i;
    EXPECT_LT(cos, 1.0f) << i;  // quantisation changes something
  }
}

TEST(Embedder, AVectorDoesNotDependOnItsNeighbours) {
  const auto& f = fx();
  const Embedder e = Embedder::embedding_rwkv(f.base, f.tok, f.checkpoint);
  const std::vector<float> all = e.embed(f.texts, /*batch=*/11);
  for (size_t i = 0; i < f.texts.size(); ++i) {
    const std::vector<std::string> one = {f.texts[i]};
    const std::vector<float> alone = e.embed(one);
    EXPECT_EQ(alone, std::vector<float>(all.begin() + i * 64, all.begin() + (i + 1) * 64)) << i;
  }
  // A long neighbour changes nothing; a different text gives a different vector.
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += f.texts[i % 10] + " ";
  const std::vector<std::string> pair = {f.texts[0], long_text};
  const std::vector<float> with_long = e.embed(pair);
  EXPECT_EQ(std::vector<float>(with_long.begin(), with_long.begin() + 64),
            std::vector<float>(all.begin(), all.begin() + 64));
  EXPECT_LT(cosine_of_normalised(std::span(all).subspan(0, 64), std::span(all).subspan(64, 64)),
            0.9999f);
}

TEST(Embedder, RefusesHeadsOfAnotherBase) {
  const auto& f = fx();
  // A base of width 128 (synthetic, 1 layer): the width-64 head is refused.
  const std::string wide = (test::scratch_dir() / "wide.safetensors").string();
  write_synthetic_checkpoint(wide, make_synth_geometry(1, 128, 256), DType::F32, 1);
  try {
    Embedder::with_head(Model::load(wide), f.tok, fixture("tasks/rm_embed_head_swift.safetensors"));
    FAIL() << "expected a width error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("model width"), std::string::npos) << e.what();
  }
  // A base whose vocabulary has no row 65535 cannot run EmbeddingRWKV.
  EXPECT_THROW(Embedder::embedding_rwkv(Model::load_default(), f.tok, f.checkpoint), CheckpointError);
  // A plain model file is not an EmbeddingRWKV checkpoint.
  EXPECT_THROW(Embedder::embedding_rwkv(f.base, f.tok, fixture("tasks/rm_embed_head_swift.safetensors")),
               CheckpointError);
  // An EmbeddingRWKV checkpoint with a vision tower is refused, saying so.
  {
    const io::TensorSet er = io::read_pth(io::MappedFile::open(f.checkpoint));
    std::vector<io::TensorToWrite> t;
    for (const io::TensorView& v : er.tensors())
      t.push_back({v.name, v.dtype, v.shape,
                   std::string_view(reinterpret_cast<const char*>(v.data), v.nbytes)});
    const std::vector<float> patch(16, 0.5f);
    t.push_back({"vit.patch_embed.weight", DType::F32, {4, 4},
                 std::string_view(reinterpret_cast<const char*>(patch.data()), 64)});
    const std::string p = (test::scratch_dir() / "vision.safetensors").string();
    io::write_safetensors(p, t);
    try {
      Model::load(p);
      FAIL() << "expected the vision tower to be refused";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find("vision"), std::string::npos) << e.what();
    }
  }
  // A terminator outside the vocabulary.
  EmbedContract bad;
  bad.terminator = 70000;
  EXPECT_THROW(Embedder::plain(f.base, f.tok, bad), InputError);
}

}  // namespace
}  // namespace wick
