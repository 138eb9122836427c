// The reranker against ../shared/fixtures/tasks (docs/tasks.md §5): token contracts, head
// logits of both formats on both paths, the document-state cache and index, refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <memory>

#include "io/pth.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io/mapped_file.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/rerank.h"
#include "wick/state_file.h"
#include "wick/tokenizer.h"

namespace wick {
namespace {

using test::fixture;
using test::floats;
using test::ints;
using test::load_fixture_tensors;

struct TasksFixture {
  Model base = Model::load(fixture("tasks/er_emb_model.pth"));
  std::shared_ptr<const Tokenizer> tok =
      load_world_tokenizer(fixture("tokenizers/vocab/rwkv_vocab_v20230424.txt"));
  nlohmann::json texts = nlohmann::json::parse(test::read_file(fixture("tasks/texts.json")));
  std::vector<std::string> queries = texts["queries"].get<std::vector<std::string>>();
  std::vector<std::string> docs = texts["docs"].get<std::vector<std::string>>();
};

TasksFixture& fx() {
  static TasksFixture* f = new TasksFixture();
  return *f;
}

// Row q of a [3, 4] reference matrix.
std::vector<float> row(const std::vector<float>& m, int q) {
  return std::vector<float>(m.begin() + 4 * q, m.begin() + 4 * q + 4);
}

std::vector<int64_t> order(const Reranker& r, const std::vector<float>& logits) {
  std::vector<int64_t> o;
  for (const RerankResult& x : r.rank(logits)) o.push_back(x.index);
  return o;
}

TEST(Reranker, BackboneWithoutLmHeadLoadsAndRefusesLogits) {
  const Model& m = fx().base;
  EXPECT_FALSE(m.has_lm_head());
  EXPECT_TRUE(m.info().embedding_rwkv);
  EXPECT_EQ(m.geometry().n_layer, 4);
  EXPECT_EQ(m.geometry().head_size, 32);
  State s = m.new_state();
  const std::vector<int32_t> ids = {33155, 65535};
  EXPECT_THROW(m.forward(ids, s), InputError);
  EXPECT_EQ(m.hidden(ids, s).size(), 64u);
}

TEST(Reranker, EmbeddingRwkvTokenContract) {
  const auto& f = fx();
  const Reranker r = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker.pth"));
  EXPECT_EQ(r.format(), RerankFormat::kEmbeddingRWKV);
  EXPECT_EQ(r.source_layers(), (std::vector<int>{1, 3}));
  const io::TensorSet ref = load_fixture_tensors("tasks/er_rerank_ref.safetensors");
  for (int d = 0; d < 4; ++d)
    EXPECT_EQ(r.prefix_tokens(f.docs[d]), ints(ref, "offline.prefix_tokens." + std::to_string(d)))
        << d;
  for (int q = 0; q < 3; ++q) {
    EXPECT_EQ(r.tail_tokens(f.queries[q]), ints(ref, "offline.tail_tokens." + std::to_string(q)));
    for (int d = 0; d < 4; ++d) {
      std::vector<int32_t> pair = r.prefix_tokens(f.docs[d]);
      const std::vector<int32_t> tail = r.tail_tokens(f.queries[q]);
      pair.insert(pair.end(), tail.begin(), tail.end());
      EXPECT_EQ(pair, ints(ref, "online.tokens." + std::to_string(q) + "." + std::to_string(d)));
    }
  }
}

TEST(Reranker, EmbeddingRwkvOnlineOfflineAndLegacyMatchThePackage) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/er_rerank_ref.safetensors");
  for (const auto& [file, prefix] : {std::pair{"tasks/er_reranker.pth", std::string("")},
                                     {"tasks/er_reranker_legacy.pth", std::string("legacy.")}}) {
    const Reranker r = Reranker::load(f.base, f.tok, fixture(file));
    const std::vector<float> online = floats(ref, prefix + "online.logits");
    const std::vector<float> offline = floats(ref, prefix + "offline.logits");
    const std::vector<State> folded = r.fold_documents(f.docs);
    std::vector<const State*> ptrs;
    for (const State& s : folded) ptrs.push_back(&s);
    double worst_direct = 0, worst_indexed = 0, worst_between = 0;
    for (int q = 0; q < 3; ++q) {
      const std::vector<float> direct = r.score(f.queries[q], f.docs);
      const std::vector<float> indexed = r.score_states(f.queries[q], ptrs);
      worst_direct = std::max(worst_direct, test::max_abs_diff(direct, row(online, q)));
      worst_indexed = std::max(worst_indexed, test::max_abs_diff(indexed, row(offline, q)));
      worst_between = std::max(worst_between, test::max_abs_diff(direct, indexed));
      EXPECT_EQ(order(r, direct), order(r, row(online, q))) << file << " q" << q;
      EXPECT_EQ(order(r, direct), order(r, indexed)) << file << " q" << q;
    }
    std::printf("[parity] %s online max-abs %.3g, offline %.3g, direct-indexed %.3g\n", file,
                worst_direct, worst_indexed, worst_between);
    EXPECT_LE(worst_direct, 1e-5) << file;
    EXPECT_LE(worst_indexed, 1e-5) << file;
    EXPECT_LE(worst_between, 1e-5) << file;
  }
  // The two files read different layers: their scores must differ (layer selection matters).
  const Reranker main = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker.pth"));
  const Reranker legacy = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker_legacy.pth"));
  EXPECT_EQ(legacy.source_layers(), (std::vector<int>{0, 1}));
  EXPECT_GT(test::max_abs_diff(main.score(f.queries[0], f.docs), legacy.score(f.queries[0], f.docs)),
            0.1);
}

TEST(Reranker, EmbeddingRwkvSigmoidAndBaseStates) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/er_rerank_ref.safetensors");
  const Reranker r = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker.pth"));
  const std::vector<float> sig = floats(ref, "online.sigmoid");
  const std::vector<float> logits = floats(ref, "online.logits");
  for (size_t i = 0; i < sig.size(); ++i) EXPECT_NEAR(r.score_of(logits[i]), sig[i], 1e-7);
  // The base state after the pair (q0, d2): WKV and shifts against the package.
  const Geometry& g = f.base.geometry();
  State s = f.base.new_state();
  std::vector<int32_t> pair = r.prefix_tokens(f.docs[2]);
  const std::vector<int32_t> tail = r.tail_tokens(f.queries[0]);
  pair.insert(pair.end(), tail.begin(), tail.end());
  f.base.hidden(pair, s);
  const std::vector<float> wkv = floats(ref, "online.wkv");      // [3, 4, L, H, N, N]
  const std::vector<float> shift = floats(ref, "online.shift");  // [3, 4, L, 2, C]
  const size_t wkv_pair = static_cast<size_t>(g.n_layer) * s.wkv_size();
  const size_t shift_pair = static_cast<size_t>(g.n_layer) * 2 * g.n_embd;
  double worst_wkv = 0, worst_shift = 0, scale = 0;
  for (int l = 0; l < g.n_layer; ++l) {
    const float* w_ref = wkv.data() + (0 * 4 + 2) * wkv_pair + l * s.wkv_size();
    worst_wkv = std::max(worst_wkv, test::max_abs_diff(s.wkv(l), w_ref, s.wkv_size()));
    for (size_t i = 0; i < s.wkv_size(); ++i) scale = std::max(scale, std::fabs(double(w_ref[i])));
    const float* sh = shift.data() + (0 * 4 + 2) * shift_pair + l * 2 * g.n_embd;
    worst_shift = std::max(worst_shift, test::max_abs_diff(s.att_shift(l), sh, g.n_embd));
    worst_shift = std::max(worst_shift, test::max_abs_diff(s.ffn_shift(l), sh + g.n_embd, g.n_embd));
  }
  std::printf("[parity] EmbeddingRWKV pair state: wkv max-abs %.3g (max |wkv| %.3g), shifts %.3g\n",
              worst_wkv, scale, worst_shift);
  EXPECT_LE(worst_wkv, 1e-4 * std::max(1.0, scale));
  EXPECT_LE(worst_shift, 1e-4);
  // The head alone, fed the package's stored WKV states, reproduces its logits.
  std::vector<State> stored;
  for (int q = 0; q < 3; ++q) {
    for (int d = 0; d < 4; ++d) {
      State st = f.base.new_state();
      for (int l = 0; l < g.n_layer; ++l)
        std::copy_n(wkv.data() + (q * 4 + d) * wkv_pair + l * st.wkv_size(), st.wkv_size(),
                    st.wkv(l));
      stored.push_back(std::move(st));
    }
  }
  std::vector<const State*> ptrs;
  for (const State& st : stored) ptrs.push_back(&st);
  const double head_only = test::max_abs_diff(r.head_logits(ptrs), logits);
  std::printf("[parity] EmbeddingRWKV head on the package's WKV states: logits max-abs %.3g\n",
              head_only);
  EXPECT_LE(head_only, 1e-5);
  // The folded prefix states against the package's cached ones.
  const std::vector<State> folded = r.fold_documents(f.docs);
  const std::vector<float> pw = floats(ref, "offline.prefix_wkv");
  double worst_prefix = 0;
  for (int d = 0; d < 4; ++d)
    for (int l = 0; l < g.n_layer; ++l)
      worst_prefix = std::max(
          worst_prefix, test::max_abs_diff(folded[d].wkv(l),
                                           pw.data() + d * wkv_pair + l * s.wkv_size(), s.wkv_size()));
  EXPECT_LE(worst_prefix, 1e-4 * std::max(1.0, scale));
}

TEST(Reranker, HeadV1TokenContractsOfBothSpellings) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/rm_rerank_ref.safetensors");
  for (const char* h : {"a", "b"}) {
    const Reranker r =
        Reranker::load(f.base, f.tok, fixture(std::string("tasks/rm_reranker_head_") + h + ".safetensors"));
    EXPECT_EQ(r.format(), RerankFormat::kHeadV1);
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(r.prefix_tokens(f.docs[d]),
                ints(ref, std::string(h) + ".prefix_tokens." + std::to_string(d)))
          << h << d;
    for (int q = 0; q < 3; ++q)
      EXPECT_EQ(r.tail_tokens(f.queries[q]),
                ints(ref, std::string(h) + ".tail_tokens." + std::to_string(q)))
          << h << q;
  }
  const Reranker a = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_a.safetensors"));
  const Reranker b = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_b.safetensors"));
  EXPECT_EQ(a.source_layers(), (std::vector<int>{1, 3}));
  EXPECT_EQ(b.source_layers(), (std::vector<int>{2, 2}));  // shared_state: the last entry's layer
  EXPECT_EQ(a.n_probe(), 2);
  EXPECT_EQ(a.contract().terminator, std::optional<int32_t>(0));
  EXPECT_EQ(b.contract().terminator, std::nullopt);
  EXPECT_EQ(b.contract().max_doc_tokens, 12);
  EXPECT_EQ(b.contract().max_query_tokens, 5);
}

TEST(Reranker, HeadV1DirectAndIndexedMatchTheReferences) {
  const auto& f = fx();
  const io::TensorSet ref = load_fixture_tensors("tasks/rm_rerank_ref.safetensors");
  for (const char* h : {"a", "b"}) {
    const Reranker r =
        Reranker::load(f.base, f.tok, fixture(std::string("tasks/rm_reranker_head_") + h + ".safetensors"));
    const std::vector<float> direct_ref = floats(ref, std::string(h) + ".direct");
    const std::vector<float> indexed_ref = floats(ref, std::string(h) + ".indexed");
    const DocumentIndex index = DocumentIndex::build(r, f.docs);
    double worst = 0;
    for (int q = 0; q < 3; ++q) {
      const std::vector<float> direct = r.score(f.queries[q], f.docs, /*batch=*/3);
      const std::vector<float> indexed = index.score(r, f.queries[q]);
      worst = std::max({worst, test::max_abs_diff(direct, row(direct_ref, q)),
                        test::max_abs_diff(indexed, row(indexed_ref, q))});
      EXPECT_EQ(order(r, direct), order(r, indexed)) << h << q;
      EXPECT_EQ(order(r, direct), order(r, row(direct_ref, q))) << h << q;
      // Batch size does not change a score (packed rows, no padding).
      EXPECT_EQ(direct, r.score(f.queries[q], f.docs, 1));
    }
    std::printf("[parity] rwkv-metal head %s direct/indexed max-abs %.3g\n", h, worst);
    EXPECT_LE(worst, 1e-5) << h;
  }
}

TEST(Reranker, RanksByLogitThenIndex) {
  const auto& f = fx();
  const Reranker r = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_a.safetensors"));
  const std::vector<float> logits = {0.5f, 2.f, 0.5f, -1.f};
  const std::vector<RerankResult> out = r.rank(logits);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].index, 1);
  EXPECT_EQ(out[1].index, 0);
  EXPECT_EQ(out[2].index, 2);
  EXPECT_EQ(out[3].index, 3);
  EXPECT_EQ(out[0].score, 2.f);  // no sigmoid for this format
  EXPECT_TRUE(r.score("q", {}).empty());
}

TEST(Reranker, DocumentIndexOnDiskEqualsInMemoryBitForBit) {
  const auto& f = fx();
  const Reranker r = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker.pth"));
  const std::string dir = (test::scratch_dir() / "index").string();
  const DocumentIndex built = DocumentIndex::build(r, f.docs, dir);
  EXPECT_EQ(built.folded(), 4u);
  const DocumentIndex opened = DocumentIndex::open(r, dir);
  ASSERT_EQ(opened.size(), 4u);
  EXPECT_EQ(opened.documents(), f.docs);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(opened.state(i), built.state(i));
  for (const std::string& q : f.queries) EXPECT_EQ(opened.score(r, q), built.score(r, q));
  // A second build over the folder folds nothing; a new document is folded alone.
  std::vector<std::string> more = f.docs;
  more.push_back("A fifth document about honey.");
  const DocumentIndex again = DocumentIndex::build(r, more, dir);
  EXPECT_EQ(again.folded(), 1u);
  EXPECT_EQ(again.state(0), built.state(0));
  EXPECT_NE(again.state(4), again.state(0));
  // Another head contract refuses the index.
  const Reranker other = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_a.safetensors"));
  EXPECT_THROW(DocumentIndex::open(other, dir), InputError);
  // So does the same head over bf16 matmul inputs (its states are other numbers), and its own
  // index, built at bf16, folds its documents again and reopens only at bf16.
  const Reranker bf16 = Reranker::load(f.base.with_precision(Precision::kBf16), f.tok,
                                       fixture("tasks/er_reranker.pth"));
  EXPECT_THROW(DocumentIndex::open(bf16, dir), InputError);
  const std::string dir16 = (test::scratch_dir() / "index-bf16").string();
  const DocumentIndex built16 = DocumentIndex::build(bf16, f.docs, dir16);
  EXPECT_EQ(built16.folded(), 4u);
  EXPECT_NE(built16.state(0), built.state(0));
  EXPECT_EQ(DocumentIndex::open(bf16, dir16).state(0), built16.state(0));
  EXPECT_THROW(DocumentIndex::open(r, dir16), InputError);
}

TEST(Reranker, IndexBuiltFromACacheIntoAFolderOpensAndEditedIndexIsRefused) {
  const auto& f = fx();
  const Reranker r = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker.pth"));
  DocStateCache cache(64ull << 20);
  const DocumentIndex warm = DocumentIndex::build(r, f.docs, "", &cache);  // cache only
  const std::string dir = (test::scratch_dir() / "index").string();
  const DocumentIndex built = DocumentIndex::build(r, f.docs, dir, &cache);
  EXPECT_EQ(built.folded(), 0u);  // every state came from the cache ...
  const DocumentIndex opened = DocumentIndex::open(r, dir);  // ... and was still written
  for (size_t i = 0; i < f.docs.size(); ++i) EXPECT_EQ(opened.state(i), warm.state(i));
  EXPECT_THROW(opened.state(4), std::out_of_range);
  // An index.json whose texts were swapped no longer matches its keys.
  nlohmann::json j = nlohmann::json::parse(test::read_file(std::filesystem::path(dir) / "index.json"));
  std::swap(j["docs"][0]["text"], j["docs"][1]["text"]);
  test::write_file(std::filesystem::path(dir) / "index.json", j.dump());
  EXPECT_THROW(DocumentIndex::open(r, dir), FormatError);
  j["docs"] = 5;
  test::write_file(std::filesystem::path(dir) / "index.json", j.dump());
  EXPECT_THROW(DocumentIndex::open(r, dir), FormatError);
  j = nlohmann::json::parse(test::read_file(std::filesystem::path(dir) / "index.json"));
  j["model"] = 7;  // wrong type: a wick error, not a JSON library exception
  test::write_file(std::filesystem::path(dir) / "index.json", j.dump());
  EXPECT_THROW(DocumentIndex::open(r, dir), FormatError);
  EXPECT_THROW(DocumentIndex::build(r, {}, ""), InputError);
}

TEST(Reranker, CacheEvictsLeastRecentlyUsedByBytes) {
  const State s(2, 8, 2, 4);
  DocStateCache cache(2 * s.bytes());
  cache.put("a", s);
  cache.put("b", s);
  EXPECT_NE(cache.get("a"), nullptr);  // a is now the most recent
  cache.put("c", s);                   // evicts b
  EXPECT_EQ(cache.get("b"), nullptr);
  EXPECT_NE(cache.get("a"), nullptr);
  EXPECT_NE(cache.get("c"), nullptr);
  EXPECT_EQ(cache.bytes(), 2 * s.bytes());
  DocStateCache tiny(s.bytes() - 1);
  tiny.put("x", s);
  EXPECT_EQ(tiny.size(), 0u);
  // build() takes states from the cache.
  const auto& f = fx();
  const Reranker r = Reranker::load(f.base, f.tok, fixture("tasks/er_reranker.pth"));
  DocStateCache docs(64ull << 20);
  EXPECT_EQ(DocumentIndex::build(r, f.docs, "", &docs).folded(), 4u);
  EXPECT_EQ(docs.size(), 4u);
  EXPECT_EQ(DocumentIndex::build(r, f.docs, "", &docs).folded(), 0u);
}

TEST(Reranker, RefusesHeadsOfAnotherGeometryAndBadInput) {
  const auto& f = fx();
  // The head of this fixture on a base of another width: refused, naming both geometries.
  try {
    Reranker::load(Model::load_default(), f.tok, fixture("tasks/rm_reranker_head_a.safetensors"));
    FAIL() << "expected a geometry error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the base"), std::string::npos) << e.what();
  }
  // Loading a reranker file as a language model says what it is.
  EXPECT_THROW(Model::load(fixture("tasks/er_reranker.pth")), CheckpointError);
  // A copy of head A whose metadata records another base (12 layers), and one without the
  // format marker: refused when strict; the second loads non-strictly.
  const io::TensorSet head_a =
      io::read_safetensors(io::MappedFile::open(fixture("tasks/rm_reranker_head_a.safetensors")));
  std::vector<io::TensorToWrite> tensors;
  for (const io::TensorView& t : head_a.tensors())
    tensors.push_back({t.name, t.dtype, t.shape,
                       std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
  std::map<std::string, std::string> meta = head_a.metadata();
  meta["base_n_layer"] = "12";
  const std::string other_base = (test::scratch_dir() / "other_base.safetensors").string();
  io::write_safetensors(other_base, tensors, meta);
  try {
    Reranker::load(f.base, f.tok, other_base);
    FAIL() << "expected a base mismatch error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("base_n_layer"), std::string::npos) << e.what();
  }
  meta = head_a.metadata();
  meta.erase("format");
  const std::string unmarked = (test::scratch_dir() / "unmarked.safetensors").string();
  io::write_safetensors(unmarked, tensors, meta);
  EXPECT_THROW(Reranker::load(f.base, f.tok, unmarked), CheckpointError);
  EXPECT_EQ(Reranker::load(f.base, f.tok, unmarked, /*strict=*/false).source_layers(),
            (std::vector<int>{1, 3}));
  // r_k stored flat ([D], the Swift spelling) loads and scores as the [H, N] original.
  {
    std::vector<io::TensorToWrite> flat = tensors;
    for (io::TensorToWrite& t : flat)
      if (t.name.size() > 9 && t.name.substr(t.name.size() - 9) == ".tmix.r_k") t.shape = {64};
    const std::string flat_path = (test::scratch_dir() / "flat_rk.safetensors").string();
    io::write_safetensors(flat_path, flat, head_a.metadata());
    const Reranker flat_r = Reranker::load(f.base, f.tok, flat_path);
    const Reranker orig = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_a.safetensors"));
    EXPECT_EQ(flat_r.score(f.queries[0], f.docs), orig.score(f.queries[0], f.docs));
  }
  // Layer lists: one per head block, inside the base, not empty.
  for (const auto& [value, needle] :
       {std::pair<std::string, std::string>{"1", "one base layer per head block"},
        {"1,9", "outside the base"},
        {"", "at least one layer"},
        {"1,x", "list of layer indices"}}) {
    meta = head_a.metadata();
    meta["layer_idx"] = value;
    const std::string p = (test::scratch_dir() / "layers.safetensors").string();
    io::write_safetensors(p, tensors, meta);
    try {
      Reranker::load(f.base, f.tok, p);
      ADD_FAILURE() << "accepted layer_idx '" << value << "'";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  meta = head_a.metadata();
  meta["n_probe"] = "3";  // the probe table has 2 rows
  const std::string probe_path = (test::scratch_dir() / "probe.safetensors").string();
  io::write_safetensors(probe_path, tensors, meta);
  EXPECT_THROW(Reranker::load(f.base, f.tok, probe_path), CheckpointError);
  // An EmbeddingRWKV reranker needs its EmbeddingRWKV base (strict), e.g. not a plain LM.
  const std::string plain_base = (test::scratch_dir() / "plain.safetensors").string();
  {
    const io::TensorSet er = io::read_pth(io::MappedFile::open(fixture("tasks/er_emb_model.pth")));
    std::vector<io::TensorToWrite> t;
    for (const io::TensorView& v : er.tensors())
      if (v.name.rfind("rwkv.", 0) == 0)
        t.push_back({v.name.substr(5), v.dtype, v.shape,
                     std::string_view(reinterpret_cast<const char*>(v.data), v.nbytes)});
    const io::TensorView* emb = er.find("rwkv.emb.weight");
    t.push_back({"head.weight", emb->dtype, emb->shape,
                 std::string_view(reinterpret_cast<const char*>(emb->data), emb->nbytes)});
    io::write_safetensors(plain_base, t);
  }
  const Model lm = Model::load(plain_base);
  EXPECT_TRUE(lm.has_lm_head());
  EXPECT_THROW(Reranker::load(lm, f.tok, fixture("tasks/er_reranker.pth")), CheckpointError);
  EXPECT_NO_THROW(Reranker::load(lm, f.tok, fixture("tasks/er_reranker.pth"), /*strict=*/false));
  // NaN logits sort last.
  const Reranker a = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_a.safetensors"));
  const std::vector<float> with_nan = {NAN, 1.f, 2.f};
  const std::vector<RerankResult> ranked = a.rank(with_nan);
  EXPECT_EQ(ranked[0].index, 2);
  EXPECT_EQ(ranked[2].index, 0);
  // A query-first head: the document is part of the tail, so it cannot be indexed.
  meta = head_a.metadata();
  meta.erase("doc_first");
  meta["template"] = "query_first";
  const std::string query_first = (test::scratch_dir() / "query_first.safetensors").string();
  io::write_safetensors(query_first, tensors, meta);
  const Reranker qf = Reranker::load(f.base, f.tok, query_first);
  EXPECT_FALSE(qf.contract().doc_first);
  EXPECT_THROW(qf.fold_documents(f.docs), InputError);
  const std::vector<int32_t> doc_ids = f.tok->encode(f.docs[1]);
  const std::vector<int32_t> tail = qf.tail_tokens(f.queries[0], f.docs[1]);
  EXPECT_TRUE(std::search(tail.begin(), tail.end(), doc_ids.begin(), doc_ids.end()) != tail.end());
  EXPECT_EQ(qf.score(f.queries[0], f.docs).size(), 4u);
  const Reranker b = Reranker::load(f.base, f.tok, fixture("tasks/rm_reranker_head_b.safetensors"));
  // Head B truncates documents to 12 tokens: a longer document keeps its first 12.
  const std::string long_doc = f.docs[0] + " " + f.docs[1];
  EXPECT_EQ(b.prefix_tokens(long_doc), b.prefix_tokens(f.docs[0]));
}

}  // namespace
}  // namespace wick
