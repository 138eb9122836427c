// safetensors reader + writer: a round trip through write_safetensors / read_safetensors, the
// writer's input checks, and one crafted file per way a safetensors file can be damaged or lie
// about itself. Every damaged file must be refused with a FormatError that names the file, the
// tensor (where there is one) and says what was expected and what was found.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "test_util.h"
#include "wick/errors.h"

namespace wick {
namespace {

namespace fs = std::filesystem;
using io::TensorToWrite;

template <class T>
std::string_view bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A raw safetensors file: the given header text (used verbatim, no padding) and data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

// Writes `bytes` as `name` in this test's scratch folder and returns the path.
std::string put(const std::string& name, const std::string& bytes) {
  fs::path p = test::scratch_dir() / name;
  test::write_file(p, bytes);
  return p.string();
}

io::TensorSet read(const std::string& path) { return io::read_safetensors(io::MappedFile::open(path)); }

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Reads `path`, expecting a FormatError; checks that its message names the file, the tensor
// (when `tensor` is not empty) and says "expected" and "found". Returns the message.
std::string expect_format_error(const std::string& path, const std::string& tensor = "") {
  try {
    io::TensorSet s = read(path);
    ADD_FAILURE() << "no error reading " << path << " (" << s.size() << " tensors)";
    return "";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.path(), path) << m;
    EXPECT_TRUE(contains(m, path)) << m;
    EXPECT_TRUE(contains(m, "expected")) << m;
    EXPECT_TRUE(contains(m, "found")) << m;
    EXPECT_FALSE(e.expected().empty()) << m;
    EXPECT_FALSE(e.found().empty()) << m;
    if (!tensor.empty()) {
      EXPECT_EQ(e.tensor(), tensor) << m;
      EXPECT_TRUE(contains(m, "'" + tensor + "'")) << m;
    }
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected wick::FormatError reading " << path << ", got: " << e.what();
    return "";
  }
}

// A valid one-tensor file with the given JSON entry for tensor "t" and 8 data bytes.
std::string one_tensor(const std::string& entry, const std::string& data = std::string(8, '\x01')) {
  return raw_file("{\"t\":" + entry + "}", data);
}

// ---------------------------------------------------------------------------------------------
// Writer

TEST(SafetensorsWriter, RoundTrip) {
  std::vector<float> f32 = {1.5f, -2.25f, 3.0e-38f, 7.0f, -0.0f, 1e30f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80};  // 1, -2, inf
  std::vector<uint16_t> f16 = {0x3c00, 0x0001, 0xfbff, 0x8000};
  std::vector<int8_t> i8 = {-128, 0, 127};
  std::vector<uint8_t> u8 = {0, 255};
  std::vector<int16_t> i16 = {-32768, 32767, 5};
  std::vector<int32_t> i32 = {-1, 2, 2147483647, -2147483647 - 1};
  std::vector<int64_t> i64 = {int64_t{1} << 62, -5};
  std::vector<float> scalar = {42.0f};
  std::vector<TensorToWrite> in = {
      {"z.last.but.written.first", DType::F32, {2, 3}, bytes_of(f32)},
      {"bf", DType::BF16, {3}, bytes_of(bf16)},
      {"half", DType::F16, {2, 1, 2}, bytes_of(f16)},
      {"i8", DType::I8, {3}, bytes_of(i8)},
      {"u8", DType::U8, {1, 2}, bytes_of(u8)},
      {"i16", DType::I16, {3}, bytes_of(i16)},
      {"i32", DType::I32, {2, 2}, bytes_of(i32)},
      {"i64", DType::I64, {2}, bytes_of(i64)},
      {"scalar", DType::F32, {}, bytes_of(scalar)},
      {"empty", DType::F32, {0, 3}, std::string_view()},
  };
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "a \"quoted\" \xc3\xa9 value"}};

  const std::string bytes = io::serialize_safetensors(in, meta);
  // Layout: u64 length, header starting with __metadata__, data 8-byte aligned, data in order.
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ((8 + n) % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.rfind("{\"__metadata__\":", 0), 0u) << header;
  EXPECT_LT(header.find("z.last.but.written.first"), header.find("\"bf\"")) << header;
  EXPECT_EQ(bytes.substr(8 + n, 24), std::string(bytes_of(f32)));
  size_t total = 0;
  for (auto& t : in) total += t.bytes.size();
  EXPECT_EQ(bytes.size(), 8 + n + total);

  const fs::path dir = test::scratch_dir();
  const std::string path = (dir / "round.safetensors").string();
  io::write_safetensors(path, in, meta);
  EXPECT_EQ(test::read_file(path), bytes);
  // Nothing but the file itself is left in the folder (the temporary file was renamed).
  int entries = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);

  io::TensorSet set = read(path);
  EXPECT_EQ(set.metadata(), meta);
  ASSERT_EQ(set.size(), in.size());
  for (const TensorToWrite& t : in) {
    SCOPED_TRACE(t.name);
    const io::TensorView* v = set.find(t.name);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->dtype, t.dtype);
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->nbytes, t.bytes.size());
    if (!t.bytes.empty()) EXPECT_EQ(std::memcmp(v->data, t.bytes.data(), t.bytes.size()), 0);
  }

  // Without metadata there is no __metadata__ key at all; overwriting an existing file works.
  io::write_safetensors(path, {in[0]});
  const std::string again = test::read_file(path);
  EXPECT_EQ(again.find("__metadata__"), std::string::npos);
  io::TensorSet s2 = read(path);
  EXPECT_TRUE(s2.metadata().empty());
  EXPECT_EQ(s2.size(), 1u);
}

TEST(SafetensorsWriter, RealModelRoundTripIsExact) {
  io::TensorSet orig = test::load_fixture_tensors("tiny-rwkv7/tiny-rwkv7-834K.safetensors");
  std::vector<TensorToWrite> list;
  for (const io::TensorView& t : orig.tensors())
    list.push_back({t.name, t.dtype, t.shape,
                    std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
  const std::string path = (test::scratch_dir() / "copy.safetensors").string();
  io::write_safetensors(path, list, orig.metadata());
  io::TensorSet copy = read(path);
  ASSERT_EQ(copy.size(), orig.size());
  EXPECT_EQ(copy.metadata(), orig.metadata());
  for (const io::TensorView& t : orig.tensors()) {
    const io::TensorView* c = copy.find(t.name);
    ASSERT_NE(c, nullptr) << t.name;
    EXPECT_EQ(c->dtype, t.dtype) << t.name;
    EXPECT_EQ(c->shape, t.shape) << t.name;
    ASSERT_EQ(c->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(std::memcmp(c->data, t.data, t.nbytes), 0) << t.name;
  }
}

TEST(SafetensorsWriter, RejectsBadInput) {
  std::vector<float> three = {1, 2, 3};
  auto expect_error = [](const std::vector<TensorToWrite>& in, const std::string& must_contain) {
    try {
      io::serialize_safetensors(in);
      ADD_FAILURE() << "no error; expected one mentioning " << must_contain;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), must_contain)) << e.what();
    }
  };
  // Byte count does not match prod(shape) x dtype size.
  expect_error({{"short", DType::F32, {4}, bytes_of(three)}}, "'short'");
  expect_error({{"short", DType::F32, {4}, bytes_of(three)}}, "expected 16 bytes");
  expect_error({{"wrongtype", DType::F16, {3}, bytes_of(three)}}, "found 12");
  // Repeated and reserved names.
  expect_error({{"a", DType::F32, {3}, bytes_of(three)}, {"a", DType::F32, {3}, bytes_of(three)}},
               "'a'");
  expect_error({{"__metadata__", DType::F32, {3}, bytes_of(three)}}, "__metadata__");
  expect_error({{"", DType::F32, {3}, bytes_of(three)}}, "empty name");
  // Negative dimension, overflowing shape.
  expect_error({{"neg", DType::F32, {-1, -3}, bytes_of(three)}}, "negative");
  expect_error({{"huge", DType::F32, {int64_t{1} << 40, int64_t{1} << 40}, bytes_of(three)}},
               "overflow");
  // The file is not written when the input is bad.
  const fs::path p = test::scratch_dir() / "bad.safetensors";
  EXPECT_THROW(io::write_safetensors(p.string(), {{"a", DType::F32, {2}, bytes_of(three)}}), Error);
  EXPECT_FALSE(fs::exists(p));
}

TEST(SafetensorsWriter, UnwritablePathIsFileError) {
  const fs::path p = test::scratch_dir() / "no" / "such" / "folder" / "x.safetensors";
  std::vector<float> one = {1};
  try {
    io::write_safetensors(p.string(), {{"a", DType::F32, {1}, bytes_of(one)}});
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), p.string());
    EXPECT_TRUE(contains(e.what(), p.string())) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Reader: damaged files

TEST(SafetensorsReader, EmptyFile) {
  const std::string m = expect_format_error(put("empty.safetensors", ""));
  EXPECT_TRUE(contains(m, "0 bytes")) << m;
}

TEST(SafetensorsReader, FiveByteFile) {
  const std::string m = expect_format_error(put("five.safetensors", std::string("\x10\0\0\0\0", 5)));
  EXPECT_TRUE(contains(m, "5 bytes")) << m;
}

TEST(SafetensorsReader, HeaderLengthBeyondFile) {
  std::string f = u64_le(1000) + "{\"t\":{}}";
  const std::string m = expect_format_error(put("beyond.safetensors", f));
  EXPECT_TRUE(contains(m, "1000")) << m;
}

TEST(SafetensorsReader, HeaderLengthHuge) {
  std::string f = u64_le(uint64_t{1} << 63) + "{}      ";
  const std::string m = expect_format_error(put("huge.safetensors", f));
  EXPECT_TRUE(contains(m, "9223372036854775808")) << m;
  // All ones as well (8 + N would wrap around).
  expect_format_error(put("ones.safetensors", u64_le(~uint64_t{0}) + "{}      "));
}

TEST(SafetensorsReader, InvalidJson) {
  const std::string m =
      expect_format_error(put("badjson.safetensors", raw_file("{\"t\": {\"dtype\": ", "")));
  EXPECT_TRUE(contains(m, "JSON")) << m;
  expect_format_error(put("garbage.safetensors", raw_file("\x89PNG\r\n\x1a\n", "")));
}

TEST(SafetensorsReader, HeaderNotAnObject) {
  std::string m = expect_format_error(put("array.safetensors", raw_file("[1, 2, 3]", "")));
  EXPECT_TRUE(contains(m, "object")) << m;
  EXPECT_TRUE(contains(m, "array")) << m;
  m = expect_format_error(put("string.safetensors", raw_file("\"hello\"", "")));
  EXPECT_TRUE(contains(m, "string")) << m;
  expect_format_error(put("null.safetensors", raw_file("null", "")));
}

TEST(SafetensorsReader, DuplicateTensorKey) {
  const std::string entry = "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  const std::string m = expect_format_error(
      put("dup.safetensors", raw_file("{\"t\":" + entry + ",\"t\":" + entry + "}",
                                      std::string(8, '\0'))),
      "t");
  EXPECT_TRUE(contains(m, "duplicate")) << m;
}

TEST(SafetensorsReader, UnknownDtype) {
  for (const char* dt : {"F64", "Q4", "f32", ""}) {
    SCOPED_TRACE(dt);
    const std::string m = expect_format_error(
        put("dtype.safetensors",
            one_tensor(std::string("{\"dtype\":\"") + dt + "\",\"shape\":[1],\"data_offsets\":[0,8]}")),
        "t");
    EXPECT_TRUE(contains(m, std::string("'") + dt + "'")) << m;
  }
  // dtype not a string.
  expect_format_error(
      put("dtype-int.safetensors", one_tensor("{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}")),
      "t");
}

TEST(SafetensorsReader, BadShapeDimension) {
  for (const char* shape : {"[-2]", "[2.5]", "[\"2\"]", "[null]", "[2, -1]", "[1e3]",
                            "[18446744073709551616]"}) {
    SCOPED_TRACE(shape);
    expect_format_error(
        put("shape.safetensors",
            one_tensor(std::string("{\"dtype\":\"F32\",\"shape\":") + shape + ",\"data_offsets\":[0,8]}")),
        "t");
  }
  // shape not an array.
  expect_format_error(
      put("shape-obj.safetensors", one_tensor("{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}")),
      "t");
}

TEST(SafetensorsReader, OffsetsBeginAfterEnd) {
  const std::string m = expect_format_error(
      put("rev.safetensors", one_tensor("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}")),
      "t");
  EXPECT_TRUE(contains(m, "[8, 4]")) << m;
}

TEST(SafetensorsReader, OffsetsBeyondDataSection) {
  const std::string m = expect_format_error(
      put("past.safetensors", one_tensor("{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}")),
      "t");
  EXPECT_TRUE(contains(m, "16")) << m;
  EXPECT_TRUE(contains(m, "8")) << m;
  // Malformed offsets.
  for (const char* off : {"[0]", "[0,8,8]", "[-8,0]", "\"0-8\"", "[0,8.0]"}) {
    SCOPED_TRACE(off);
    expect_format_error(
        put("off.safetensors",
            one_tensor(std::string("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":") + off + "}")),
        "t");
  }
  expect_format_error(put("nooff.safetensors", one_tensor("{\"dtype\":\"F32\",\"shape\":[2]}")), "t");
}

TEST(SafetensorsReader, DtypeShapeDisagreeWithSpan) {
  // F32 [3] needs 12 bytes; the span is 8.
  std::string m = expect_format_error(
      put("span.safetensors", one_tensor("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}")),
      "t");
  EXPECT_TRUE(contains(m, "12")) << m;
  EXPECT_TRUE(contains(m, "8 bytes")) << m;
  // BF16 [2] needs 4 bytes; the span is 8 (the F32 bytes labelled BF16).
  m = expect_format_error(
      put("span2.safetensors", one_tensor("{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}")),
      "t");
  EXPECT_TRUE(contains(m, "BF16")) << m;
}

TEST(SafetensorsReader, OverlappingTensors) {
  const std::string h =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
  const std::string m = expect_format_error(put("overlap.safetensors", raw_file(h, std::string(12, '\0'))),
                                            "b");
  EXPECT_TRUE(contains(m, "'a'")) << m;
  // The same range twice.
  const std::string h2 =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  expect_format_error(put("same.safetensors", raw_file(h2, std::string(8, '\0'))));
}

TEST(SafetensorsReader, MetadataWithNonStringValue) {
  const std::string h =
      "{\"__metadata__\":{\"format\":\"pt\",\"step\":1000},"
      "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string m = expect_format_error(put("meta.safetensors", raw_file(h, std::string(8, '\0'))));
  EXPECT_TRUE(contains(m, "'step'")) << m;
  expect_format_error(put("meta2.safetensors", raw_file("{\"__metadata__\":[\"pt\"]}", "")));
  expect_format_error(put("meta3.safetensors", raw_file("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", "")));
}

TEST(SafetensorsReader, UnknownFieldInTensorEntry) {
  const std::string m = expect_format_error(
      put("field.safetensors",
          one_tensor("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"quant\":\"q4\"}")),
      "t");
  EXPECT_TRUE(contains(m, "'quant'")) << m;
  // An entry that is not an object at all.
  expect_format_error(put("notobj.safetensors", one_tensor("[\"F32\",[2],[0,8]]")), "t");
}

TEST(SafetensorsReader, ShapeProductOverflows) {
  // 2^40 x 2^40 x 2^40 elements: every dimension is plausible alone, the product is not.
  const std::string m = expect_format_error(
      put("overflow.safetensors",
          one_tensor("{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776,1099511627776],"
                     "\"data_offsets\":[0,8]}")),
      "t");
  EXPECT_TRUE(contains(m, "overflow")) << m;
  // A product that fits in 64 bits but times the dtype size does not (2^62 x 4 bytes).
  expect_format_error(put("overflow2.safetensors",
                          one_tensor("{\"dtype\":\"F32\",\"shape\":[4294967296,1073741824],"
                                     "\"data_offsets\":[0,8]}")),
                      "t");
  // A zero dimension makes the product 0, whatever the others are.
  io::TensorSet s = read(put("zero.safetensors",
                             raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[281474976710656,0],"
                                      "\"data_offsets\":[0,0]}}",
                                      "")));
  ASSERT_NE(s.find("t"), nullptr);
  EXPECT_EQ(s.find("t")->nbytes, 0u);
}

TEST(SafetensorsReader, TruncatedRealModel) {
  const std::string whole = test::read_file(test::fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors"));
  ASSERT_GT(whole.size(), 1000u);
  const std::string path = put("half.safetensors", whole.substr(0, whole.size() / 2));
  try {
    read(path);
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, path)) << m;
    EXPECT_FALSE(e.tensor().empty()) << m;
    EXPECT_TRUE(contains(m, "'" + e.tensor() + "'")) << m;
    EXPECT_TRUE(contains(m, "expected")) << m;
    EXPECT_TRUE(contains(m, "found")) << m;
  }
  // Cut inside the header as well.
  expect_format_error(put("header-cut.safetensors", whole.substr(0, 100)));
}

// ---------------------------------------------------------------------------------------------
// Reader: valid but unusual files

// MLX writes the header without padding, so the data section (and every tensor) can start at any
// byte. Such a file is valid and must read the same values.
TEST(SafetensorsReader, UnalignedDataSectionReadsSameValues) {
  std::vector<float> a = {1.0f, -2.5f, 3.25f, 1e-20f, 65504.0f};
  std::vector<uint16_t> b = {0x3f80, 0x4049, 0xbf80};
  std::vector<int64_t> c = {-7, int64_t{1} << 40};
  const std::string data = std::string(bytes_of(a)) + std::string(bytes_of(b)) + std::string(bytes_of(c));
  // 20 + 6 bytes before c: c (I64) is not even 2-byte aligned relative to the data section.
  std::string header =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,20]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[20,26]},"
      "\"c\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[26,42]}}";
  for (int extra = 0; extra < 8; ++extra) {
    std::string h = header + std::string(extra, ' ');
    SCOPED_TRACE("header bytes " + std::to_string(h.size()));
    io::TensorSet s = read(put("mlx.safetensors", raw_file(h, data)));
    const io::TensorView* ta = s.find("a");
    const io::TensorView* tb = s.find("b");
    const io::TensorView* tc = s.find("c");
    ASSERT_TRUE(ta && tb && tc);
    EXPECT_EQ(test::floats(s, "a"), a);
    std::vector<uint16_t> gb(3);
    std::memcpy(gb.data(), tb->data, 6);
    EXPECT_EQ(gb, b);
    std::vector<int64_t> gc(2);
    std::memcpy(gc.data(), tc->data, 16);
    EXPECT_EQ(gc, c);
  }
}

}  // namespace
}  // namespace wick
