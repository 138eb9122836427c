// The `.rwkvq` container writer (src/quant/rwkvq_writer.h): Python json.dumps formatting of the
// manifest, the recommended byte-for-byte container convention (docs/rwkvq-format.md §1.1), and
// conformance C0: each fixture parsed by the reader and written again from its buffers and
// manifest is byte-identical to the file rwkv-quant wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "quant/quant_test_util.h"
#include "quant/rwkvq.h"
#include "quant/rwkvq_writer.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick::test {
namespace {

using nlohmann::ordered_json;
using quant::python_json_dumps;

TEST(RwkvqWriter, PythonJsonDumpsFormatting) {
  EXPECT_EQ(python_json_dumps(ordered_json::parse(R"({"a": [1, 2, {}], "b": {"c": null}})")),
            R"({"a": [1, 2, {}], "b": {"c": null}})");
  EXPECT_EQ(python_json_dumps(ordered_json::parse(R"({"z":1,"a":true,"m":false,"e":[]})")),
            R"({"z": 1, "a": true, "m": false, "e": []})");
  // Floats as Python's repr.
  const std::vector<std::pair<double, std::string>> floats = {
      {0.01, "0.01"},       {1.0, "1.0"},          {1e-8, "1e-08"},
      {1e16, "1e+16"},      {1e15, "1000000000000000.0"}, {0.0001, "0.0001"},
      {0.00001, "1e-05"},   {1.5e20, "1.5e+20"},   {-2.5, "-2.5"},
      {123.456, "123.456"}, {0.1 + 0.2, "0.30000000000000004"}, {-0.0, "-0.0"},
      {5e-324, "5e-324"},   {1.7976931348623157e308, "1.7976931348623157e+308"},
      {12345678901234567.0, "1.2345678901234568e+16"}, {0.5, "0.5"}, {100.0, "100.0"}};
  for (const auto& [v, want] : floats) EXPECT_EQ(python_json_dumps(ordered_json(v)), want) << v;
  EXPECT_EQ(python_json_dumps(ordered_json(std::numeric_limits<double>::infinity())), "Infinity");
  EXPECT_EQ(python_json_dumps(ordered_json(-7)), "-7");
  // ensure_ascii: everything outside 0x20..0x7e escaped, lowercase hex, surrogate pairs.
  EXPECT_EQ(python_json_dumps(ordered_json("caf\xc3\xa9")), R"("caf\u00e9")");
  EXPECT_EQ(python_json_dumps(ordered_json("\x7f")), R"("\u007f")");
  EXPECT_EQ(python_json_dumps(ordered_json("\xf0\x9f\x98\x80")), R"("\ud83d\ude00")");
  EXPECT_EQ(python_json_dumps(ordered_json("q\"b\\n\nt\tr\rb\bf\f\x01")),
            R"("q\"b\\n\nt\tr\rb\bf\f\u0001")");
  EXPECT_THROW(python_json_dumps(ordered_json(std::string("\xff"))), Error);
}

// Builds the records of a parsed file back from the reader's view of it.
std::vector<quant::TensorRecord> records_of(const quant::RwkvqFile& f) {
  std::vector<quant::TensorRecord> v;
  for (const quant::QuantTensor& t : f.tensors()) {
    quant::TensorRecord r;
    r.key = t.key;
    r.kind = std::string(quant::layout_name(t.layout));
    r.shape = t.shape;
    r.bits = t.bits;
    r.group = t.group;
    r.gw_gs = t.gs;
    r.gw_sb = t.sb;
    r.n_blocks = t.n_blocks;
    r.transposed = t.transposed;
    for (const std::string& field : quant::field_order())
      if (field_view(t, field)) r.fields.push_back(field);
    v.push_back(std::move(r));
  }
  return v;
}

std::vector<io::TensorToWrite> buffers_of(const quant::RwkvqFile& f) {
  std::vector<io::TensorToWrite> v;
  for (const io::TensorView& t : f.buffers().tensors()) {
    v.push_back({t.name, t.dtype, t.shape,
                 std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
  }
  return v;
}

TEST(RwkvqWriter, FixturesRewriteByteIdentically) {
  for (const char* name : {"tiny_reduction.rwkvq", "tiny_compression.rwkvq"}) {
    SCOPED_TRACE(name);
    const std::string path = fixture(std::string("rwkvq/") + name);
    const std::string original = read_file(path);
    const quant::RwkvqFile f = quant::RwkvqFile::open(io::MappedFile::open(path));
    const std::string& text = f.manifest().text;

    // The manifest: json.dumps formatting of the parsed manifest reproduces it...
    const ordered_json j = ordered_json::parse(text);
    EXPECT_EQ(python_json_dumps(j), text);
    // ... and so does the record builder, from the reader's parsed records.
    quant::ManifestHeader h;
    h.format_version = f.manifest().format_version;
    h.naming = f.manifest().naming;
    h.n_layer = f.manifest().n_layer;
    h.n_embd = f.manifest().n_embd;
    h.head_size = f.manifest().head_size;
    h.vocab_size = f.manifest().vocab_size;
    h.config_repr = f.manifest().config_repr;
    h.config = j.at("config");
    h.tokenizer = f.manifest().tokenizer;
    EXPECT_EQ(quant::manifest_text(h, records_of(f)), text);

    // The container, from the parsed buffers in any order.
    std::vector<io::TensorToWrite> buffers = buffers_of(f);
    EXPECT_TRUE(quant::serialize_rwkvq(text, buffers) == original);
    std::reverse(buffers.begin(), buffers.end());
    EXPECT_TRUE(quant::serialize_rwkvq(text, buffers) == original);
    const auto out = scratch_dir() / name;
    EXPECT_EQ(quant::write_rwkvq(out.string(), text, buffers), original.size());
    EXPECT_TRUE(read_file(out) == original);
  }
}

TEST(RwkvqWriter, ContainerFollowsTheRecommendedConvention) {
  const std::string b16(16, '\x01'), b8(8, '\x02'), b4(4, '\x03'), b2(2, '\x04'), b1(1, '\x05');
  std::vector<io::TensorToWrite> in = {
      {"b::codes", DType::U8, {4}, b4},      {"a::codes", DType::U8, {2}, b2},
      {"a::gw_d", DType::F16, {2}, b4},      {"z::dense", DType::BF16, {4}, b8},
      {"a::gw_scale", DType::F32, {4}, b16}, {"a::idx", DType::I32, {2}, b8},
      {"a::gw_qs", DType::I8, {1}, b1},      {"empty::dense", DType::BF16, {0, 3}, ""},
      {"B::codes", DType::U8, {1}, b1}};
  const std::string bytes = quant::serialize_rwkvq("{\"format\": \"rwkvq\"}", in);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"rwkvq\":\"{\\\"format\\\": \\\"rwkvq\\\"}\"},", 0),
            0u)
      << header;
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  EXPECT_LT(header.size() - last - 1, 8u) << "space padding to a multiple of 8 only";
  EXPECT_EQ(header.find("empty"), std::string::npos) << "zero-element buffers are not stored";
  // Data order: F32 > I32 > BF16 > F16 > I8 > U8, then names byte-wise ("B" < "a" < "b").
  const std::vector<std::string> want = {"a::gw_scale", "a::idx",   "z::dense", "a::gw_d",
                                         "a::gw_qs",    "B::codes", "a::codes", "b::codes"};
  size_t pos = 0;
  for (const std::string& name : want) {
    const size_t p = header.find("\"" + name + "\"");
    ASSERT_NE(p, std::string::npos) << name;
    EXPECT_GT(p, pos) << name;
    pos = p;
  }
  EXPECT_NE(
      header.find("\"a::gw_scale\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}"),
      std::string::npos);
  // It reads back as safetensors with the data tiled in that order.
  const auto path = scratch_dir() / "c.rwkvq";
  write_file(path, bytes);
  io::TensorSet set = io::read_safetensors(io::MappedFile::open(path.string()));
  EXPECT_EQ(set.size(), 8u);
  EXPECT_EQ(set.metadata().at("rwkvq"), "{\"format\": \"rwkvq\"}");
  EXPECT_EQ(bytes.size(), 8 + n + 16 + 8 + 8 + 4 + 1 + 1 + 2 + 4);
  // Bad input.
  in.push_back({"a::codes", DType::U8, {2}, b2});
  EXPECT_THROW(quant::serialize_rwkvq("{}", in), Error);
  EXPECT_THROW(quant::serialize_rwkvq("{}", {{"x", DType::U8, {3}, b2}}), Error);
}

TEST(RwkvqWriter, StreamingWriterPlacesBuffersInAnyOrderAndIsAtomic) {
  const std::string a(24, 'a'), b(6, 'b'), c(10, 'c');
  const std::vector<io::TensorToWrite> in = {{"t::codes", DType::U8, {24}, a},
                                             {"t::gw_d", DType::F16, {3}, b},
                                             {"u::dense", DType::BF16, {5}, c},
                                             {"v::dense", DType::BF16, {0}, ""}};
  const std::string manifest = "{\"format\": \"rwkvq\", \"x\": \"\\u00e9\"}";
  const std::string want = quant::serialize_rwkvq(manifest, in);
  std::vector<quant::BufferSpec> specs;
  for (const auto& t : in) specs.push_back({t.name, t.dtype, t.shape});
  const auto dir = scratch_dir();
  const std::string out = (dir / "s.rwkvq").string();
  {
    quant::RwkvqContainerWriter w(out, manifest, specs);
    w.write("u::dense", c.data(), c.size());
    w.write("t::codes", a.data(), a.size());
    EXPECT_THROW(w.write("t::codes", a.data(), a.size()), Error);  // twice
    EXPECT_THROW(w.write("t::gw_d", b.data(), 4), Error);          // wrong size
    EXPECT_THROW(w.write("nope", b.data(), b.size()), Error);
    EXPECT_THROW(w.commit(), Error);  // t::gw_d missing
    EXPECT_FALSE(std::filesystem::exists(out));
    w.write("t::gw_d", b.data(), b.size());
    w.write("v::dense", nullptr, 0);
    EXPECT_EQ(w.commit(), want.size());
  }
  EXPECT_TRUE(read_file(out) == want);
  // Abandoned without commit(): the target keeps its old bytes and no temporary file is left.
  {
    quant::RwkvqContainerWriter w(out, "{}", specs);
    w.write("t::codes", a.data(), a.size());
  }
  EXPECT_TRUE(read_file(out) == want);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_THROW(quant::RwkvqContainerWriter((dir / "no/such/dir/x.rwkvq").string(), "{}", specs),
               FileError);
}

TEST(RwkvqWriter, ManifestTextKeysInSpecOrder) {
  quant::ManifestHeader h;
  h.naming = "world";
  h.n_layer = 2;
  h.n_embd = 256;
  h.head_size = 64;
  h.vocab_size = 256;
  h.config_repr = "QuantConfig(proj=5)";
  h.config = nullptr;
  quant::TensorRecord r;
  r.key = "emb.weight";
  r.kind = "sb6";
  r.shape = {256, 256};
  r.bits = 5;
  r.group = "emb";
  r.gw_gs = 32;
  r.gw_sb = 8;
  r.n_blocks = 8;
  r.fields = {"codes_packed", "gw_d"};
  EXPECT_EQ(quant::manifest_text(h, {r}),
            "{\"format\": \"rwkvq\", \"format_version\": 2, \"naming\": \"world\", \"n_layer\": 2, "
            "\"n_embd\": 256, \"head_size\": 64, \"vocab_size\": 256, \"config_repr\": "
            "\"QuantConfig(proj=5)\", \"config\": null, \"tokenizer\": null, \"tensors\": "
            "{\"emb.weight\": {\"kind\": \"sb6\", \"shape\": [256, 256], \"bits\": 5, \"group\": "
            "\"emb\", \"gw_gs\": 32, \"gw_sb\": 8, \"n_blocks\": 8, \"transposed\": false, "
            "\"fields\": [\"codes_packed\", \"gw_d\"]}}}");
  EXPECT_THROW(quant::manifest_text(h, {r, r}), Error);
}

}  // namespace
}  // namespace wick::test
