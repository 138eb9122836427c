// One background thread with a bounded queue, so the I/O thread never blocks: the API runs the
// model passes outside the engine (embeddings, rerank) on one, and parses, tokenizes and answers
// request bodies on another. When the queue is full the request is refused at once (503)
// instead of waiting.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace wick::server {

class BackgroundWorker {
 public:
  explicit BackgroundWorker(size_t max_queued) : max_(max_queued) {
    thread_ = std::thread([this] { loop(); });
  }
  ~BackgroundWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Queues `task`; false (nothing queued) when max_queued tasks already wait. Tasks must not
  // throw (they answer their request themselves). Tasks still queued at destruction are run.
  bool post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (tasks_.size() >= max_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return quit_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  const size_t max_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace wick::server
