// The target table, the runner that enforces the contract, and the per-process input files.
#include "fuzz/fuzz_target.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <typeinfo>

#include "wick/errors.h"

namespace wick::fuzz {

// Defined by the target files (fuzz_io.cpp, fuzz_formats.cpp, fuzz_tasks.cpp, fuzz_http.cpp).
void check_safetensors(Bytes);
void check_zip(Bytes);
void check_pickle(Bytes);
void check_pth(Bytes);
void check_rwkvq(Bytes);
void check_tokenizer_json(Bytes);
void check_world_vocab(Bytes);
void check_state_file(Bytes);
void check_state_file_rwkvx(Bytes);
void check_rerank_head(Bytes);
void check_embed_head(Bytes);
void check_doc_index(Bytes);
void check_act_stats(Bytes);
void check_quant_config(Bytes);
void check_http(Bytes);

namespace {

const Target kTargets[] = {
    {"safetensors", "a safetensors file (header and tensors)", check_safetensors},
    {"zip", "a ZIP archive (PyTorch checkpoints' container)", check_zip},
    {"pickle", "a pickle stream (the restricted unpickler)", check_pickle},
    {"pth", "a PyTorch .pth checkpoint, loaded as a model and run", check_pth},
    {"rwkvq", "a .rwkvq file (container, manifest, buffers), loaded as a model and run",
     check_rwkvq},
    {"tokenizer_json", "a HuggingFace tokenizer.json", check_tokenizer_json},
    {"world_vocab", "an RWKV World vocabulary file", check_world_vocab},
    {"state_file", "a wick state file for an RWKV-7 model", check_state_file},
    {"state_file_rwkvx", "a wick state file for an RWKV-X model (KV caches)",
     check_state_file_rwkvx},
    {"rerank_head", "a reranker head file (rwkv-metal / SwiftRWKV safetensors)", check_rerank_head},
    {"embed_head", "an embedding head file", check_embed_head},
    {"doc_index", "a reranker document index's index.json", check_doc_index},
    {"act_stats", "an activation-statistics file", check_act_stats},
    {"quant_config", "a quantiser config JSON file", check_quant_config},
    {"http", "an HTTP request to wick serve's router (every endpoint's body validation)",
     check_http},
};

const Target* g_current = nullptr;  // the target running (fuzzers and the replay are one thread)

}  // namespace

std::span<const Target> targets() { return kTargets; }

const Target* find_target(std::string_view name) {
  for (const Target& t : kTargets)
    if (t.name == name) return &t;
  return nullptr;
}

void violated(const std::string& what) {
  std::fprintf(stderr, "\nwick fuzz: CONTRACT VIOLATION in target '%s': %s\n",
               g_current ? std::string(g_current->name).c_str() : "?", what.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string run(const Target& t, Bytes input) {
  g_current = &t;
  std::string refused;
  try {
    t.check(input);
  } catch (const Error& e) {
    // Refused with one of wick's typed errors: the contract for bad input.
    refused = e.what();
    if (refused.empty()) refused = "(a wick::Error without a message)";
  } catch (const std::bad_alloc&) {
    violated("std::bad_alloc escaped: a size taken from the input was allocated before it was "
             "checked against the input (loaders must allocate at most a small multiple of it)");
  } catch (const std::exception& e) {
    violated(std::string("an exception that is not a wick::Error escaped: ") + typeid(e).name() +
             ": " + e.what());
  } catch (...) {
    violated("a non-standard exception escaped");
  }
  g_current = nullptr;
  return refused;
}

namespace {

struct Scratch {
  std::filesystem::path dir;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
          ("wick-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

std::string input_file(Bytes input, std::string_view suffix) {
  static Scratch scratch;
  const std::filesystem::path p = scratch.dir / ("input" + std::string(suffix));
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
  out.close();
  if (!out) violated("cannot write the scratch file " + p.string());
  return p.string();
}

}  // namespace wick::fuzz
