// `wick embed` and `wick rerank` end to end on ../shared/fixtures/tasks: the --json contracts
// of issue 8, the safetensors output, the --index folder reused across calls, and the errors for
// bad input lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace wick::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

// A JSON-lines file with one {"text": ...} per text.
std::string write_texts(const std::filesystem::path& dir, const std::string& name,
                        const std::vector<std::string>& texts) {
  std::string body;
  for (const std::string& t : texts) body += nlohmann::json{{"text", t}}.dump() + "\n";
  write_file(dir / name, body);
  return (dir / name).string();
}

struct TaskTexts {
  nlohmann::json j = nlohmann::json::parse(read_file(fixture("tasks/texts.json")));
  std::vector<std::string> embed = j["embed_texts"].get<std::vector<std::string>>();
  std::vector<std::string> queries = j["queries"].get<std::vector<std::string>>();
  std::vector<std::string> docs = j["docs"].get<std::vector<std::string>>();
};

std::vector<float> l2(std::vector<float> v) {
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  for (float& x : v) x = float(x / std::sqrt(ss + 1e-12));
  return v;
}

TEST(CliTasks, EmbedJsonMatchesTheEmbeddingRwkvReference) {
  const TaskTexts t;
  const auto dir = scratch_dir();
  const std::string file = write_texts(dir, "texts.jsonl", t.embed);
  const CliRun r = run_wick("embed --model " + q(fixture("tasks/er_emb_model.pth")) +
                            " --task sts --file " + q(file) + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["embeddings"].size(), t.embed.size());
  const io::TensorSet ref = load_fixture_tensors("tasks/er_embed_ref.safetensors");
  const std::vector<float> sts = floats(ref, "sts");
  double worst = 0;
  for (size_t i = 0; i < t.embed.size(); ++i) {
    const std::vector<float> got = out["embeddings"][i].get<std::vector<float>>();
    const std::vector<float> want = l2(std::vector<float>(sts.begin() + 64 * i, sts.begin() + 64 * (i + 1)));
    worst = std::max(worst, max_abs_diff(got, want));
  }
  EXPECT_LE(worst, 1e-5);
  // --out writes the same vectors as a safetensors matrix.
  const std::string out_file = (dir / "vectors.safetensors").string();
  const CliRun w = run_wick("embed --model " + q(fixture("tasks/er_emb_model.pth")) +
                            " --task sts --file " + q(file) + " --out " + q(out_file));
  ASSERT_EQ(w.status, 0) << w.err;
  EXPECT_TRUE(w.out.empty());
  const io::TensorSet saved = io::read_safetensors(io::MappedFile::open(out_file));
  const std::vector<float> m = floats(saved, "embeddings");
  ASSERT_EQ(m.size(), t.embed.size() * 64);
  for (size_t i = 0; i < t.embed.size(); ++i)
    EXPECT_EQ(std::vector<float>(m.begin() + 64 * i, m.begin() + 64 * (i + 1)),
              out["embeddings"][i].get<std::vector<float>>())
        << i;  // JSON floats print in the shortest form that reads back exactly
  EXPECT_EQ(saved.metadata().at("format"), "wick-embeddings-v1");
}

TEST(CliTasks, EmbedWithHeadFileAndErrors) {
  const TaskTexts t;
  const auto dir = scratch_dir();
  const std::string file = write_texts(dir, "texts.jsonl", t.embed);
  const CliRun r = run_wick("embed --model " + q(fixture("tasks/er_emb_model.pth")) + " --head " +
                            q(fixture("tasks/rm_embed_head_swift.safetensors")) + " --file " + q(file));
  // An EmbeddingRWKV checkpoint has its own heads: --head is refused with the way out.
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--task"), std::string::npos) << r.err;
  // A line that is not JSON names the file and line.
  write_file(dir / "bad.jsonl", "{\"text\": \"ok\"}\nnot json\n");
  const CliRun bad = run_wick("embed --model " + q(fixture("tasks/er_emb_model.pth")) + " --file " +
                              q((dir / "bad.jsonl").string()));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("bad.jsonl:2"), std::string::npos) << bad.err;
  write_file(dir / "notext.jsonl", "{\"title\": \"x\"}\n");
  const CliRun notext = run_wick("embed --model " + q(fixture("tasks/er_emb_model.pth")) +
                                 " --file " + q((dir / "notext.jsonl").string()));
  EXPECT_EQ(notext.status, 1);
  EXPECT_NE(notext.err.find("\"text\""), std::string::npos) << notext.err;
}

TEST(CliTasks, RerankJsonIsSortedAndMatchesTheReference) {
  const TaskTexts t;
  const auto dir = scratch_dir();
  const std::string docs = write_texts(dir, "docs.jsonl", t.docs);
  const io::TensorSet ref = load_fixture_tensors("tasks/er_rerank_ref.safetensors");
  const std::vector<float> logits = floats(ref, "online.logits");
  const std::string base = "rerank --model " + q(fixture("tasks/er_emb_model.pth")) + " --head " +
                           q(fixture("tasks/er_reranker.pth")) + " --json --query " + q(t.queries[1]);
  const CliRun r = run_wick(base + " --docs " + q(docs));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out["results"].size(), 4u);
  float previous = INFINITY;
  for (const auto& item : out["results"]) {
    const int i = item["index"].get<int>();
    const float logit = item["logit"].get<float>();
    EXPECT_NEAR(logit, logits[4 + i], 1e-5);
    EXPECT_NEAR(item["score"].get<float>(), 1 / (1 + std::exp(-logit)), 1e-6);  // sigmoid
    EXPECT_LE(logit, previous);
    previous = logit;
  }
  EXPECT_EQ(out["results"][0]["index"].get<int>(), 2);  // fixture ordering for q1: 2, 0, 1, 3
  // --index: the first call folds and stores; the next ones reuse, also without --docs.
  const std::string index = (dir / "index").string();
  const CliRun first = run_wick(base + " --docs " + q(docs) + " --index " + q(index));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(nlohmann::json::parse(first.out), out);
  const CliRun again = run_wick(base + " --index " + q(index));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out), out);
  // Another query gives another ordering score set.
  const CliRun other = run_wick("rerank --model " + q(fixture("tasks/er_emb_model.pth")) +
                                " --head " + q(fixture("tasks/er_reranker.pth")) +
                                " --json --query " + q(t.queries[2]) + " --index " + q(index));
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_NE(nlohmann::json::parse(other.out), out);
}

TEST(CliTasks, RerankHumanOutputAndRefusals) {
  const TaskTexts t;
  const auto dir = scratch_dir();
  const std::string docs = write_texts(dir, "docs.jsonl", t.docs);
  const CliRun r = run_wick("rerank --model " + q(fixture("tasks/er_emb_model.pth")) + " --head " +
                            q(fixture("tasks/rm_reranker_head_a.safetensors")) + " --query " +
                            q(t.queries[0]) + " --docs " + q(docs) + " --top-k 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("rank"), std::string::npos);
  EXPECT_NE(r.out.find("Пчёлы"), std::string::npos) << r.out;  // d2 ranks first for q0 (head A)
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);  // header + 2 rows
  // The embedding model is not a reranker head, and the reranker is not a model.
  const CliRun wrong = run_wick("rerank --model " + q(fixture("tasks/er_reranker.pth")) +
                                " --head " + q(fixture("tasks/er_reranker.pth")) + " --query x --docs " +
                                q(docs));
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.err.find("reranker head"), std::string::npos) << wrong.err;
}

}  // namespace
}  // namespace wick::test
