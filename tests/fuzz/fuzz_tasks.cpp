// Targets for the task heads: reranker and embedding head files, and a reranker document index's
// index.json.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "fuzz/fuzz_models.h"
#include "fuzz/fuzz_target.h"
#include "wick/embed.h"
#include "wick/errors.h"
#include "wick/rerank.h"
#include "wick/synth.h"

namespace wick::fuzz {

void check_rerank_head(Bytes in) {
  const std::string path = input_file(in, "-head.safetensors");
  for (bool strict : {true, false}) {
    try {
      const Reranker r = Reranker::load(tiny_model(), byte_tokenizer(), path, strict);
      WICK_FUZZ_EXPECT(!r.source_layers().empty(), "a head without blocks was accepted");
      for (int l : r.source_layers())
        WICK_FUZZ_EXPECT(l >= 0 && l < tiny_model().geometry().n_layer,
                         "a source layer outside the base: " + std::to_string(l));
      const std::string docs[] = {"a short document", ""};
      const std::vector<float> s = r.score("a query", docs, 2);
      WICK_FUZZ_EXPECT(s.size() == 2, "one score per document");
    } catch (const Error&) {
      // refused (strict refusals are expected for files without the metadata)
    }
  }
}

void check_embed_head(Bytes in) {
  const std::string path = input_file(in, "-embed.safetensors");
  Embedder::Overrides pooling;
  pooling.pooling = Pooling::kMean;
  for (int mode = 0; mode < 3; ++mode) {
    try {
      const Embedder e = mode == 0   ? Embedder::with_head(tiny_model(), byte_tokenizer(), path)
                         : mode == 1 ? Embedder::with_head(tiny_model(), byte_tokenizer(), path, false)
                                     : Embedder::with_head(tiny_model(), byte_tokenizer(), path,
                                                           false, pooling);
      const std::string texts[] = {"hello", "a second text"};
      const std::vector<float> v = e.embed(texts, 2);
      WICK_FUZZ_EXPECT(v.size() == 2 * static_cast<size_t>(e.dim()), "embedding size");
    } catch (const Error&) {
    }
  }
}

namespace {

// A reranker with a synthetic head for the tiny model, and an index of two documents built with
// it: the fuzz input replaces that index's index.json (the states stay).
struct IndexFixture {
  std::optional<Reranker> reranker;
  std::string dir;
  IndexFixture() {
    const std::string head = scratch_folder() + "/rerank-head.safetensors";
    write_synthetic_reranker_head(head, tiny_model().geometry(), 1, 5, 7);
    reranker.emplace(Reranker::load(tiny_model(), byte_tokenizer(), head));
    dir = scratch_folder() + "/index";
    DocumentIndex::build(*reranker, {"first document", "second document"}, dir);
  }
};

const IndexFixture& index_fixture() {
  static const IndexFixture fx;
  return fx;
}

}  // namespace

void write_library_seeds(const std::string& corpus_dir) {
  namespace fs = std::filesystem;
  fs::create_directories(fs::path(corpus_dir) / "rerank_head");
  write_synthetic_reranker_head(corpus_dir + "/rerank_head/synthetic-1-block.safetensors",
                                tiny_model().geometry(), 1, 5, 7);
  fs::create_directories(fs::path(corpus_dir) / "doc_index");
  fs::copy_file(index_fixture().dir + "/index.json", corpus_dir + "/doc_index/index.json",
                fs::copy_options::overwrite_existing);
}

void check_doc_index(Bytes in) {
  const IndexFixture& fx = index_fixture();
  {
    std::ofstream out(fx.dir + "/index.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size()));
  }
  const DocumentIndex index = DocumentIndex::open(*fx.reranker, fx.dir);
  WICK_FUZZ_EXPECT(index.size() == index.documents().size(), "index size");
  for (size_t i = 0; i < index.size(); ++i) {
    const State& s = index.state(i);
    WICK_FUZZ_EXPECT(s.n_layer() == tiny_model().geometry().n_layer, "a document state's geometry");
  }
  if (index.size() > 0 && index.size() <= 64)
    WICK_FUZZ_EXPECT(index.score(*fx.reranker, "query").size() == index.size(), "scores");
}

}  // namespace wick::fuzz
