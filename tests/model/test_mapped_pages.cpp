// What a loaded model asks of its mapped file's pages (model/model_impl.h): the embedding table
// (dense, or a .rwkvq table's packed buffers), read one row per token, is advised for sparse reads
// (io::MappedFile::advise_sparse) and nothing else is; a head tied to the table keeps it whole.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/model_impl.h"
#include "smaps_util.h"
#include "test_util.h"
#include "wick/model.h"
#include "wick/quantize.h"
#include "wick/synth.h"

namespace wick {
namespace {

// A synthetic checkpoint whose embedding table spans many pages (by default 65536 x 64 fp32:
// 16 MiB).
std::string synthetic_file(const std::string& name, const std::string& geometry = "1:64:65536") {
  const std::string path = (test::scratch_dir() / name).string();
  write_synthetic_checkpoint(path, parse_synth_geometry(geometry), DType::F32, 5);
  return path;
}

constexpr size_t kTableBytes = size_t{65536} * 64 * 4;

TEST(MappedPages, LoadAdvisesTheEmbeddingTableAndNothingElseForSparseReads) {
  if (!test::kernel_records_advice(MADV_RANDOM, "rr"))
    GTEST_SKIP() << "this kernel does not record MADV_RANDOM (no \"rr\" in the VmFlags of "
                    "/proc/self/smaps for an advised mapping): there is nothing to check";
  const std::string path = synthetic_file("sparse-embedding.safetensors");
  const Model m = Model::load(path);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<test::SmapsMapping> sparse, rest;
  for (const test::SmapsMapping& s : test::smaps_mappings())
    if (s.path == std::filesystem::canonical(path).string())
      (test::has_flag(s.flags, "rr") ? sparse : rest).push_back(s);
  ASSERT_EQ(sparse.size(), 1u) << "expected one sparse range (the embedding table) in " << path;
  EXPECT_TRUE(test::has_flag(sparse[0].flags, "nh")) << sparse[0].flags;
  // The table's whole pages: all of it but the partial pages at its ends.
  const size_t advised = sparse[0].hi - sparse[0].lo;
  EXPECT_LE(advised, kTableBytes);
  EXPECT_GE(advised, kTableBytes - 2 * page);
  // The rest of the file (the layers and the head, as large as the table) keeps its mapping.
  ASSERT_FALSE(rest.empty());
  size_t rest_bytes = 0;
  for (const test::SmapsMapping& s : rest) {
    EXPECT_FALSE(test::has_flag(s.flags, "nh")) << s.flags;
    rest_bytes += s.hi - s.lo;
  }
  EXPECT_GT(rest_bytes, kTableBytes);
  // The model still reads its rows: a forward pass over two tokens gives finite, different logits.
  State s1 = m.new_state(), s2 = m.new_state();
  const std::vector<float> a = m.step(7, s1), b = m.step(60000, s2);
  for (const float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(a, b);
}

TEST(MappedPages, APackedTablesBuffersAreAdvisedToo) {
  if (!test::kernel_records_advice(MADV_RANDOM, "rr"))
    GTEST_SKIP() << "this kernel does not record MADV_RANDOM: there is nothing to check";
  // 256 columns: sb6 packs rows of whole 256-column superblocks.
  const std::string dense = synthetic_file("packed-embedding.safetensors", "1:256:16384");
  const std::string path =
      (std::filesystem::path(dense).parent_path() / "packed-embedding.rwkvq").string();
  quantize_plain(dense, path, "sb6:4");
  const Model m = Model::load(path);
  // The sb6:4 table: 16384 rows x 256 four-bit codes (2 MiB) plus their scales.
  size_t sparse = 0, rest = 0;
  for (const test::SmapsMapping& s : test::smaps_mappings())
    if (s.path == std::filesystem::canonical(path).string())
      (test::has_flag(s.flags, "rr") ? sparse : rest) += s.hi - s.lo;
  EXPECT_GE(sparse, size_t{2} << 20);
  EXPECT_LT(sparse, size_t{4} << 20);
  EXPECT_GT(rest, size_t{2} << 20);  // the head (as large as the table) and the layers: not advised
  State s1 = m.new_state(), s2 = m.new_state();
  const std::vector<float> a = m.step(7, s1), b = m.step(16000, s2);
  for (const float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(a, b);
}

TEST(MappedPages, ATiedHeadKeepsTheTableWhole) {
  const std::string path = synthetic_file("tied-embedding.safetensors");
  auto untied = model::build_model(io::read_safetensors(io::MappedFile::open(path)), "", "");
  const model::ByteRange table = model::dense_embedding_bytes(untied->weights);
  ASSERT_NE(table.data, nullptr);
  EXPECT_EQ(table.bytes, kTableBytes);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t advised = model::advise_sparse_embedding(*untied);
  EXPECT_GE(advised, kTableBytes - 2 * page);  // the check below can fail: an untied table is
  EXPECT_LE(advised, kTableBytes);             // advised

  auto tied = model::build_model(io::read_safetensors(io::MappedFile::open(path)), "", "");
  const model::ByteRange tied_table = model::dense_embedding_bytes(tied->weights);
  tied->weights.head =
      model::borrow_dense(tied_table.data, DType::F32, tied_table.bytes, 65536, 64);
  EXPECT_EQ(model::advise_sparse_embedding(*tied), 0u);
}

}  // namespace
}  // namespace wick
