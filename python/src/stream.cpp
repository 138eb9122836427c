#include "stream.h"

#include <chrono>

namespace wick::py_binding {

namespace py = pybind11;

bool wait_interruptible(std::mutex& mu, std::condition_variable& cv,
                        const std::function<bool()>& ready,
                        const std::function<void()>& on_interrupt) {
  using namespace std::chrono_literals;
  for (;;) {
    bool done = false;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu);
      done = cv.wait_for(lock, 50ms, ready);
    }
    if (done) return false;
    if (PyErr_CheckSignals() != 0) break;  // a handler raised (KeyboardInterrupt, ...)
  }
  // Keep the pending exception aside while waiting: nothing below may run Python code with it set.
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  on_interrupt();
  {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, ready);
  }
  PyErr_Restore(type, value, trace);
  return true;
}

void ChunkQueue::push(std::string_view chunk) {
  if (chunk.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    chunks_.emplace_back(chunk);
  }
  cv_.notify_all();
}

void ChunkQueue::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
  }
  cv_.notify_all();
}

bool ChunkQueue::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

std::optional<std::string> ChunkQueue::pop(const std::function<void()>& on_interrupt,
                                           bool& interrupted) {
  interrupted = wait_interruptible(
      mu_, cv_, [this] { return !chunks_.empty() || finished_; }, on_interrupt);
  if (interrupted) {
    // on_interrupt() cancelled the producer; wait for its end so the caller can tidy up.
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return finished_; });
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (chunks_.empty()) return std::nullopt;  // finished and drained
  std::string chunk = std::move(chunks_.front());
  chunks_.pop_front();
  return chunk;
}

void ChunkQueue::wait_finished_blocking() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return finished_; });
}

bool ChunkQueue::wait_finished(const std::function<void()>& on_interrupt) {
  return wait_interruptible(mu_, cv_, [this] { return finished_; }, on_interrupt);
}

GenerationRun::GenerationRun(Model model, std::shared_ptr<const Tokenizer> tokenizer,
                             std::vector<int32_t> prompt, GenerationConfig config, State start,
                             Continuation from, bool stream_chunks)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      prompt_(std::move(prompt)),
      config_(std::move(config)),
      state_(std::move(start)),
      from_(std::move(from)),
      stream_chunks_(stream_chunks) {
  worker_ = std::thread([this] { run(); });
}

GenerationRun::~GenerationRun() {
  cancel();
  if (worker_.joinable()) {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      worker_.join();
    } else {
      worker_.join();
    }
  }
}

void GenerationRun::run() {
  const ChunkCallback on_chunk = [this](std::string_view chunk, int32_t) {
    if (stream_chunks_) queue_.push(chunk);
    return !cancel_.load();
  };
  try {
    result_ = generate_tokens(model_, *tokenizer_, prompt_, config_, state_, from_, on_chunk);
  } catch (...) {
    error_ = std::current_exception();
  }
  queue_.finish();
}

}  // namespace wick::py_binding
