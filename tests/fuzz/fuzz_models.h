// Small models and helpers the targets share (built once per process, on first use).
#pragma once

#include <memory>
#include <string>

#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick::fuzz {

// The embedded tiny RWKV-7 model (L 12, C 64, byte vocabulary) and its tokenizer.
const Model& tiny_model();
std::shared_ptr<const Tokenizer> byte_tokenizer();
// A synthetic RWKV-X model: 2 RWKV layers and 1 attention block, C 64, vocabulary 256.
const Model& rwkvx_model();
// A scratch folder of this process for files the targets build once (removed at exit).
const std::string& scratch_folder();

// Loads the checkpoint at `path` as a model; when it loads, checks its geometry is consistent
// and runs a short parallel pass and a step (logits of the vocabulary's size, the passes agree
// in size). Throws what Model::load throws for a refused file.
void check_model_file(const std::string& path);

// Writes the seeds that need the library to make (tests/fuzz/make_corpus.sh): a synthetic reranker
// head for the tiny model in CORPUS/rerank_head/, and the index.json of the document index the
// doc_index target uses in CORPUS/doc_index/.
void write_library_seeds(const std::string& corpus_dir);

}  // namespace wick::fuzz
