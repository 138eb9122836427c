// wick error types. Every error wick throws derives from wick::Error, so a caller can catch one
// type; the subclasses let it tell a damaged file from a wrong model from bad user input.
//
// Messages are complete sentences meant for the end user: they name the file (and the tensor where
// there is one), say what was expected, what was found, and what to do about it.
#pragma once

#include <stdexcept>
#include <string>

namespace wick {

// Base of all wick errors.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A file could not be opened, mapped or read (missing file, permission, I/O error).
class FileError : public Error {
 public:
  FileError(std::string path, const std::string& message)
      : Error(path + ": " + message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The bytes of a container (safetensors, PyTorch zip/pickle) break its format or lie about
// themselves: truncated data, header beyond the file, offsets out of range or overlapping,
// dtype/shape that does not match the byte span, compressed or out-of-bounds zip entries.
// `tensor` is empty when the problem is not tied to one tensor.
class FormatError : public Error {
 public:
  FormatError(std::string path, std::string tensor, std::string expected, std::string found)
      : Error(Compose(path, tensor, expected, found)),
        path_(std::move(path)),
        tensor_(std::move(tensor)),
        expected_(std::move(expected)),
        found_(std::move(found)) {}
  const std::string& path() const { return path_; }
  const std::string& tensor() const { return tensor_; }
  const std::string& expected() const { return expected_; }
  const std::string& found() const { return found_; }

 private:
  static std::string Compose(const std::string& path, const std::string& tensor,
                             const std::string& expected, const std::string& found) {
    std::string m = path;
    if (!tensor.empty()) m += ": tensor '" + tensor + "'";
    m += ": expected " + expected + ", found " + found;
    return m;
  }
  std::string path_, tensor_, expected_, found_;
};

// A PyTorch pickle asked for something a tensor state-dict never needs (an arbitrary global,
// an unsupported opcode). Nothing from the file is ever executed; this is raised instead.
class UnsafePickleError : public FormatError {
 public:
  using FormatError::FormatError;
};

// The container is well formed but its tensors are not an RWKV-7 x070 model wick can run:
// unknown or missing tensor names, shapes that disagree with the geometry, unsupported dtypes,
// an unknown naming convention or a config.json that contradicts the weights.
class CheckpointError : public Error {
 public:
  CheckpointError(std::string path, const std::string& message)
      : Error(path + ": " + message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A well-formed safetensors file that is not a state this model can continue: not a wick state
// file, an unknown format version or kind, wrong tensors, or a state saved by a model of another
// geometry or (unless allowed) other weights.
class StateFileError : public Error {
 public:
  StateFileError(std::string path, const std::string& message)
      : Error(path + ": " + message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Bad input at run time: a token id outside the vocabulary, an empty token list where one is
// required, a State that belongs to a model of another geometry.
class InputError : public Error {
 public:
  using Error::Error;
};

// An RWKV-X KV cache would grow past its configured maximum (AttentionOptions::kv_max). Thrown
// before any state changes: start a new context, or raise the limit.
class ContextFullError : public InputError {
 public:
  using InputError::InputError;
};

// The serving engine's request queue is full (EngineOptions::queue_length): nothing was queued.
// Retry later (an HTTP server answers 503 with Retry-After) or raise the queue length.
class QueueFullError : public Error {
 public:
  using Error::Error;
};

// The engine is shutting down (Engine::shutdown) and accepts no new requests.
class EngineStoppedError : public Error {
 public:
  using Error::Error;
};

// A precondition of wick's own code failed (WICK_CHECK in src/base/check.h): a bug in wick, not a
// problem with the input. The message names the source file, line and condition. The CLI reports
// it as an internal error (exit 2) and the server as 500, unlike the other subclasses.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace wick
