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
#include "model/int8_linear.h"
#include "model/model_impl.h"
#include "quant/rwkvq.h"
#include "smaps_util.h"
#include "test_util.h"
#include "wick/model.h"
#include "wick/quantize.h"
#include "wick/synth.h"

namespace wick {
namespace {

// A synthetic checkpoint whose embedding table spans many pages (by default 65536 x 64 fp32:
// 16 MiB, as large as the head).
std::string synthetic_file(const std::string& name, const std::string& geometry = "1:64:65536") {
  const std::string path = (test::scratch_dir() / name).string();
  write_synthetic_checkpoint(path, parse_synth_geometry(geometry), DType::F32, 5);
  return path;
}

constexpr size_t kTableBytes = size_t{65536} * 64 * 4;

bool sparse_at(const void* p) {
  return test::has_flag(test::vm_flags_of_mapping_holding(p), "rr");
}

// A row of each of two tokens: finite, and different (the rows are read).
void expect_rows_read(const Model& m, int a_token, int b_token) {
  State s1 = m.new_state(), s2 = m.new_state();
  const std::vector<float> a = m.step(a_token, s1), b = m.step(b_token, s2);
  for (const float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(a, b);
}

#define SKIP_UNLESS_RANDOM_ADVICE_IS_RECORDED()                                               \
  if (!test::kernel_records_advice(MADV_RANDOM, "rr"))                                         \
  GTEST_SKIP() << "this kernel does not record MADV_RANDOM (no \"rr\" in the VmFlags of "      \
                  "/proc/self/smaps for an advised mapping): there is nothing to check"

TEST(MappedPages, LoadAdvisesTheEmbeddingTableAndNothingElseForSparseReads) {
  SKIP_UNLESS_RANDOM_ADVICE_IS_RECORDED();
  const std::string path = synthetic_file("sparse-embedding.safetensors");
  const Model m = Model::load(path);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const test::FileMappings maps =
      test::mappings_of_file(std::filesystem::canonical(path).string(), "rr");
  ASSERT_EQ(maps.with.size(), 1u) << "expected one sparse range (the embedding table) in " << path;
  // The table's whole pages: all of it but the partial pages at its ends.
  const size_t advised = test::FileMappings::bytes(maps.with);
  EXPECT_LE(advised, kTableBytes);
  EXPECT_GE(advised, kTableBytes - 2 * page);
  // The rest of the file (the layers and the head, as large as the table) keeps its mapping.
  for (const test::SmapsMapping& s : maps.without) EXPECT_FALSE(test::has_flag(s.flags, "nh"));
  EXPECT_GT(test::FileMappings::bytes(maps.without), kTableBytes);
  expect_rows_read(m, 7, 60000);
}

TEST(MappedPages, TheTableIsAdvisedNotTheHeadAndATiedHeadKeepsItWhole) {
  SKIP_UNLESS_RANDOM_ADVICE_IS_RECORDED();
  const std::string path = synthetic_file("tied-embedding.safetensors");
  auto untied = model::build_model(io::read_safetensors(io::MappedFile::open(path)), "", "");
  const model::ByteRange table = model::dense_embedding_bytes(untied->weights);
  ASSERT_NE(table.data, nullptr);
  EXPECT_EQ(table.bytes, kTableBytes);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t advised = model::advise_sparse_embedding(*untied);
  EXPECT_GE(advised, kTableBytes - 2 * page);
  EXPECT_LE(advised, kTableBytes);
  const auto* table_bytes = static_cast<const char*>(table.data);
  const kernels::MatrixRef* head = untied->weights.head->dense_matrix();
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(sparse_at(table_bytes + kTableBytes / 2));
  EXPECT_FALSE(sparse_at(static_cast<const char*>(head->data) + kTableBytes / 2));

  auto tied = model::build_model(io::read_safetensors(io::MappedFile::open(path)), "", "");
  const model::ByteRange tied_table = model::dense_embedding_bytes(tied->weights);
  tied->weights.head =
      model::borrow_dense(tied_table.data, DType::F32, tied_table.bytes, 65536, 64);
  EXPECT_TRUE(
      model::is_embedding_table(tied->weights, tied->weights.head->dense_matrix()->data));
  EXPECT_EQ(model::advise_sparse_embedding(*tied), 0u);
  EXPECT_FALSE(sparse_at(static_cast<const char*>(tied_table.data) + kTableBytes / 2));
  // Once --quantize int8 has made the tied head int8 codes, the table is read a row at a time.
  model::quantize_model_int8(*tied, test::test_pool());
  EXPECT_TRUE(sparse_at(static_cast<const char*>(tied_table.data) + kTableBytes / 2));
}

TEST(MappedPages, EveryBufferOfAPackedTableIsAdvised) {
  SKIP_UNLESS_RANDOM_ADVICE_IS_RECORDED();
  // 256 columns: sb6 packs rows of whole 256-column superblocks.
  const std::string dense = synthetic_file("packed-embedding.safetensors", "1:256:16384");
  const std::string path =
      (std::filesystem::path(dense).parent_path() / "packed-embedding.rwkvq").string();
  quantize_plain(dense, path, "sb6:4");
  const Model m = Model::load(path);  // through the loader
  const std::string canonical = std::filesystem::canonical(path).string();
  const test::FileMappings maps = test::mappings_of_file(canonical, "rr");
  EXPECT_GE(test::FileMappings::bytes(maps.with), size_t{2} << 20);     // 16384 x 256 codes
  EXPECT_GT(test::FileMappings::bytes(maps.without), size_t{2} << 20);  // head and layers
  expect_rows_read(m, 7, 16000);
  // Each buffer of the table (where it lies in the file, from a second mapping of it): every one
  // of more than two pages is advised in the loaded model's mapping (a buffer left out would keep
  // its huge-page advice).
  const auto file = io::MappedFile::open(path);
  const quant::RwkvqFile packed = quant::RwkvqFile::from_tensor_set(io::read_safetensors(file));
  const quant::QuantTensor* table = packed.find("emb.weight");
  ASSERT_NE(table, nullptr);
  ASSERT_GE(table->buffers().size(), 2u) << "expected a packed table: " << table->describe();
  const auto ours = reinterpret_cast<uintptr_t>(file->data());
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t checked = 0;
  for (const io::TensorView* v : table->buffers()) {
    if (v->nbytes <= 2 * page) continue;
    const uint64_t at = reinterpret_cast<uintptr_t>(v->data) - ours + v->nbytes / 2;
    std::string flags = "(no mapping of the model holds file offset " + std::to_string(at) + ")";
    for (const test::SmapsMapping& s : test::smaps_mappings())
      if (s.path == canonical && (s.lo < ours || s.lo >= ours + file->size()) && s.offset <= at &&
          at < s.offset + (s.hi - s.lo))
        flags = s.flags;
    EXPECT_TRUE(test::has_flag(flags, "rr")) << v->nbytes << " bytes: " << flags;
    ++checked;
  }
  EXPECT_GE(checked, 2u);
}

}  // namespace
}  // namespace wick
