#include "examples/server/hub.h"

namespace gannet_server {

bool Channel::Pop(std::chrono::milliseconds timeout, OwnedEvent* out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void Channel::Push(OwnedEvent e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(e));
  }
  cv_.notify_all();
}

Hub::~Hub() { Stop(); }

void Hub::Start(gannet_engine_t* engine) {
  engine_ = engine;
  poller_ = std::thread([this] { PollLoop(); });
  ready_.store(!closed_.load());
}

void Hub::Close() {
  closed_.store(true);
  ready_.store(false);
}

void Hub::Stop() {
  if (!engine_) return;
  stop_.store(true);
  if (poller_.joinable()) poller_.join();
  ready_.store(false);
  gannet_engine_destroy(engine_);
  engine_ = nullptr;
}

gannet_status_t Hub::Submit(const std::vector<gannet_request_t>& requests,
                            std::shared_ptr<Channel> channel, std::vector<uint64_t>* ids,
                            std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const gannet_request_t& r : requests) {
    uint64_t id = 0;
    const gannet_status_t st = gannet_engine_submit(engine_, &r, &id);
    if (st != GANNET_OK) {
      *error = gannet_last_error_message();
      for (uint64_t done : *ids) {
        entries_[done].channel = nullptr;
        gannet_engine_cancel(engine_, done);
      }
      return st;
    }
    ids->push_back(id);
    entries_[id] = Entry{channel, std::chrono::steady_clock::now(), -1};
  }
  return GANNET_OK;
}

void Hub::Abandon(const std::vector<uint64_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id : ids) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;  // already finished
    it->second.channel = nullptr;
    gannet_engine_cancel(engine_, id);  // NOT_FOUND when it finished meanwhile: fine
  }
}

void Hub::PollLoop() {
  while (!stop_.load()) {
    const gannet_event_t* const* events = nullptr;
    size_t n = 0;
    if (gannet_engine_poll(engine_, 50, 1024, &events, &n) != GANNET_OK) {
      // Only a dead engine fails poll; don't spin on it (its requests end in ERROR events).
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < n; ++i) {
      const gannet_event_t& e = *events[i];
      auto it = entries_.find(e.request_id);
      if (it == entries_.end()) continue;
      Entry& entry = it->second;
      const double since = std::chrono::duration<double>(now - entry.submitted).count();
      if (e.type == GANNET_EVENT_TOKEN && entry.ttft < 0) entry.ttft = since;
      const bool terminal = e.type != GANNET_EVENT_TOKEN;
      if (terminal) {
        metrics_.RecordFinished(entry.ttft, since, e.num_generated_tokens, e.num_prompt_tokens,
                                e.num_cached_prompt_tokens, e.finish_reason,
                                e.type == GANNET_EVENT_ERROR);
      }
      if (entry.channel) {
        OwnedEvent o;
        o.type = e.type;
        o.request_id = e.request_id;
        o.token_id = e.token_id;
        if (e.text) o.text.assign(e.text, e.text_len);
        o.logprob = e.logprob;
        if (e.num_top_logprobs > 0) {
          o.top_ids.assign(e.top_token_ids, e.top_token_ids + e.num_top_logprobs);
          o.top_logprobs.assign(e.top_logprobs, e.top_logprobs + e.num_top_logprobs);
        }
        o.finish_reason = e.finish_reason;
        o.status = e.status;
        if (e.message) o.message = e.message;
        o.num_prompt_tokens = e.num_prompt_tokens;
        o.num_generated_tokens = e.num_generated_tokens;
        o.num_cached_prompt_tokens = e.num_cached_prompt_tokens;
        entry.channel->Push(std::move(o));
      }
      if (terminal) entries_.erase(it);
    }
  }
}

}  // namespace gannet_server
