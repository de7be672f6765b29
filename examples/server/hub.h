// The one place the server talks to the engine: submits, cancels, and ONE poller thread that
// copies every event into the queue of the HTTP request it belongs to (a Channel), so each
// connection's thread only waits on its own queue. Requests whose connection went away are
// cancelled and their remaining events dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "examples/server/metrics.h"
#include "gannet/gannet.h"

namespace gannet_server {

// A gannet_event_t copied out of the poll's storage.
struct OwnedEvent {
  int32_t type = 0;
  uint64_t request_id = 0;
  int32_t token_id = -1;
  std::string text;
  float logprob = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  int32_t finish_reason = 0;
  gannet_status_t status = GANNET_OK;
  std::string message;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;
};

// The events of one HTTP request's engine requests (n choices, batch prompts), in order.
class Channel {
 public:
  // Waits up to `timeout` for an event; false on timeout.
  bool Pop(std::chrono::milliseconds timeout, OwnedEvent* out);
  void Push(OwnedEvent e);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OwnedEvent> queue_;
};

class Hub {
 public:
  Hub() = default;
  ~Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // Takes the created engine and starts the poller; Ready() is true from then on.
  void Start(gannet_engine_t* engine);
  bool Ready() const { return ready_.load(); }
  gannet_engine_t* engine() const { return engine_; }
  // From now on Ready() is false for good: waiting handlers and streams end (shutdown).
  void Close();
  // Stops the poller and destroys the engine.
  void Stop();

  // Submits the requests, all delivering to `channel`, and fills `ids`. On the first failure the
  // ones already submitted are cancelled; returns that status (message in *error).
  gannet_status_t Submit(const std::vector<gannet_request_t>& requests,
                         std::shared_ptr<Channel> channel, std::vector<uint64_t>* ids,
                         std::string* error);
  // Cancels requests that have not finished and drops their further events.
  void Abandon(const std::vector<uint64_t>& ids);
  // Cancels one request but keeps its events coming (its terminal event, CANCELLED unless it
  // finished first): the first phase of a forced call after thinking (call_after_thought.h).
  void Cancel(uint64_t id) { gannet_engine_cancel(engine_, id); }

  Metrics& metrics() { return metrics_; }

 private:
  struct Entry {
    std::shared_ptr<Channel> channel;  // null once abandoned
    std::chrono::steady_clock::time_point submitted;
    double ttft = -1;
  };
  void PollLoop();

  gannet_engine_t* engine_ = nullptr;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  std::thread poller_;
  std::mutex mu_;  // held across submit + registration so no event can precede its entry
  std::map<uint64_t, Entry> entries_;
  Metrics metrics_;
};

}  // namespace gannet_server
