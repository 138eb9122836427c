// Generation off the Python thread, with Ctrl-C.
//
// Python runs its signal handlers (KeyboardInterrupt) only on the main thread, between bytecodes
// or in PyErr_CheckSignals(). A library call that blocks with the GIL released would hold Ctrl-C
// until it returns. So generation runs on a worker (GenerationRun: wick::generate_tokens on a
// std::thread; wick::Engine requests on the engine's thread) and the Python thread waits with
// wait_interruptible(): GIL released, waking every 50 ms to run the signal handlers. When one
// raises, the generation is cancelled (wick's chunk callback returns false / the request is
// cancelled), the wait continues until it has ended - so the State has absorbed the prompt and
// every returned token and stays usable - and only then is the exception raised.
//
// Worker threads never touch Python objects: they only push chunks into C++ queues.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "wick/generate.h"
#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick::py_binding {

// Waits until ready() (evaluated with `mu` held) with the GIL released. Every 50 ms, with the GIL
// held, runs Python's pending signal handlers; when one raises, calls on_interrupt() once, then
// waits for ready() without further checks and returns true with the Python error indicator set
// (the caller raises py::error_already_set after tidying up). Returns false when ready() came
// true without an interrupt. Call with the GIL held.
bool wait_interruptible(std::mutex& mu, std::condition_variable& cv,
                        const std::function<bool()>& ready,
                        const std::function<void()>& on_interrupt);

// Text chunks streamed from a worker to a Python iterator, and the end of the stream.
// Thread-safe; push()/finish() never block on Python.
class ChunkQueue {
 public:
  void push(std::string_view chunk);  // empty chunks are dropped
  void finish();                      // no more chunks
  // The next chunk, or nullopt once finished and drained. Interruptible as above: on an
  // interrupt, calls on_interrupt(), waits for finish() and sets `interrupted` (the Python error
  // indicator is then set). Call with the GIL held.
  std::optional<std::string> pop(const std::function<void()>& on_interrupt, bool& interrupted);
  // Waits for finish() (interruptible as pop()).
  bool wait_finished(const std::function<void()>& on_interrupt);
  // Waits for finish() without looking at Python (call with the GIL released).
  void wait_finished_blocking();
  bool finished() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> chunks_;
  bool finished_ = false;
};

// One wick::generate_tokens() call on a worker thread, started by the constructor. The worker
// generates from its own copy of the start state; the caller takes the final state with
// take_state() once finished.
class GenerationRun {
 public:
  GenerationRun(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                std::vector<int32_t> prompt, GenerationConfig config, State start,
                Continuation from, bool stream_chunks);
  // Cancels a generation still running and joins the worker (releases the GIL while joining).
  ~GenerationRun();
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  ChunkQueue& chunks() { return queue_; }
  // Asks the generation to end at its next token (StopReason::kCancelled). Thread-safe.
  void cancel() { cancel_.store(true); }
  // After chunks().finished(): the result, the exception the generation threw (or null), and the
  // final state (moved out: call once).
  const GenerationResult& result() const { return result_; }
  std::exception_ptr error() const { return error_; }
  State take_state() { return std::move(state_); }

 private:
  void run();

  Model model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> prompt_;
  GenerationConfig config_;
  State state_;
  Continuation from_;
  bool stream_chunks_;
  std::atomic<bool> cancel_{false};
  ChunkQueue queue_;
  GenerationResult result_;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace wick::py_binding
