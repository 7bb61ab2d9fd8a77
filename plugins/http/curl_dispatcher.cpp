#include "curl_dispatcher.hpp"

#include <pthread.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace sqlstreams_http {
namespace {

std::once_flag curl_global;

}  // namespace

struct CurlLoop::Transfer {
  Request request;
  CURL* easy = nullptr;
  Shard* shard = nullptr;
  // The request's headers as libcurl's list, its nodes pointing into request.headers (libcurl
  // only reads the list: no copy and no allocation per header).
  std::vector<curl_slist> header_list;
  Answer answer;
  size_t body_cap = 0;
  char error[CURL_ERROR_SIZE] = {};

  curl_slist* link_headers() {
    header_list.resize(request.headers.size());
    for (size_t i = 0; i < header_list.size(); ++i) {
      header_list[i].data = request.headers[i].data();
      header_list[i].next = i + 1 < header_list.size() ? &header_list[i + 1] : nullptr;
    }
    return header_list.empty() ? nullptr : header_list.data();
  }

  static size_t on_body(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    const size_t bytes = size * n;
    const size_t room =
        t->body_cap > t->answer.body.size() ? t->body_cap - t->answer.body.size() : 0;
    t->answer.body.append(data, std::min(room, bytes));  // the rest is read and dropped
    return bytes;
  }

  static size_t on_header(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    const size_t bytes = size * n;
    std::string_view line(data, bytes);
    constexpr std::string_view kName = "retry-after:";
    if (line.size() > kName.size() && strncasecmp(line.data(), kName.data(), kName.size()) == 0) {
      line.remove_prefix(kName.size());
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
      t->answer.retry_after = std::string(line.substr(0, 128));
    } else if (line.rfind("HTTP/", 0) == 0) {
      t->answer.retry_after.reset();  // a new response (after a 100 Continue)
    }
    return bytes;
  }
};

// epoll data: the shard's index in the high half, the socket in the low half.
constexpr uint64_t kWakeKey = ~uint64_t{0};
static uint64_t epoll_key(uint32_t shard, curl_socket_t fd) {
  return (uint64_t{shard} << 32) | static_cast<uint32_t>(fd);
}

CurlDispatcher::CurlDispatcher(const Settings& settings) {
  loops_.reserve(static_cast<size_t>(settings.transfer_threads));
  for (int64_t i = 0; i < settings.transfer_threads; ++i) {
    loops_.push_back(std::make_unique<CurlLoop>(settings));
  }
}

void CurlDispatcher::submit(Request request) {
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % loops_.size();
  loops_[i]->submit(std::move(request));
}

CurlLoop::CurlLoop(const Settings& settings) : settings_(settings) {
  std::call_once(curl_global, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  bool ok = epoll_ >= 0 && wake_ >= 0;
  for (uint32_t i = 0; i < kShards; ++i) {
    Shard& shard = shards_[i];
    shard.owner = this;
    shard.index = i;
    shard.multi = curl_multi_init();
    if (shard.multi == nullptr) {
      ok = false;
      continue;
    }
    // Keep idle connections for reuse (libcurl's default cache follows the handles added and
    // closes connections a burst opened as soon as it ends).
    curl_multi_setopt(shard.multi, CURLMOPT_MAXCONNECTS, kIdleConnectionsPerShard);
    curl_multi_setopt(shard.multi, CURLMOPT_SOCKETFUNCTION, &CurlLoop::on_socket);
    curl_multi_setopt(shard.multi, CURLMOPT_SOCKETDATA, &shard);
    curl_multi_setopt(shard.multi, CURLMOPT_TIMERFUNCTION, &CurlLoop::on_timer);
    curl_multi_setopt(shard.multi, CURLMOPT_TIMERDATA, &shard);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  if (!ok || ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) != 0) {
    for (Shard& shard : shards_) {
      if (shard.multi != nullptr) curl_multi_cleanup(shard.multi);
    }
    if (epoll_ >= 0) ::close(epoll_);
    if (wake_ >= 0) ::close(wake_);
    throw std::runtime_error(
        "http: cannot set up the transfer loop (curl_multi_init, epoll, eventfd)");
  }
  thread_ = std::thread([this] { run(); });
}

CurlLoop::~CurlLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof one);
  thread_.join();
  for (CURL* e : idle_easy_) curl_easy_cleanup(e);
  for (Shard& shard : shards_) curl_multi_cleanup(shard.multi);
  ::close(epoll_);
  ::close(wake_);
}

void CurlLoop::submit(Request request) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = submitted_.empty();
    submitted_.push_back(std::move(request));
  }
  if (was_empty) {  // the dispatcher takes the whole queue at once: one wake-up is enough
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }
}

CurlLoop::FdState& CurlLoop::fd_state(curl_socket_t fd) {
  const auto i = static_cast<size_t>(fd);
  if (i >= fds_.size()) fds_.resize(i + 1);
  return fds_[i];
}

curl_socket_t CurlLoop::on_open_socket(void* loop, curlsocktype, curl_sockaddr* address) {
  const int fd = ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
  if (fd >= 0) static_cast<CurlLoop*>(loop)->fd_state(fd) = FdState{.ours = true};
  return fd >= 0 ? fd : CURL_SOCKET_BAD;
}

int CurlLoop::on_close_socket(void* loop, curl_socket_t fd) {
  static_cast<CurlLoop*>(loop)->fd_state(fd) = FdState{};  // closing drops it from the epoll set
  return ::close(fd);
}

int CurlLoop::on_socket(CURL*, curl_socket_t fd, int what, void* shard_ptr, void*) {
  auto* shard = static_cast<Shard*>(shard_ptr);
  CurlLoop& loop = *shard->owner;
  FdState& st = loop.fd_state(fd);
  if (what == CURL_POLL_REMOVE) {
    st.wanted = false;
    // A connection going back to libcurl's cache stays registered: the next transfer on it
    // (the common case under load) then costs no epoll_ctl, and an event on it while idle
    // removes it (run()). Sockets libcurl did not open through on_open_socket (a resolver's)
    // may be closed without on_close_socket, so they leave the set at once.
    if (!st.ours && st.events != 0) {
      ::epoll_ctl(loop.epoll_, EPOLL_CTL_DEL, fd, nullptr);
      st.events = 0;
    }
    return 0;
  }
  const uint32_t events =
      (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
  st.wanted = true;
  if (st.events == events && st.shard == shard->index) return 0;
  epoll_event ev{};
  ev.data.u64 = epoll_key(shard->index, fd);
  ev.events = events;
  const bool registered = st.events != 0;
  st.events = events;
  st.shard = shard->index;
  if (events == 0) {  // CURL_POLL_NONE: nothing wanted for now
    if (registered) ::epoll_ctl(loop.epoll_, EPOLL_CTL_DEL, fd, nullptr);
    return 0;
  }
  if (!registered || ::epoll_ctl(loop.epoll_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    ::epoll_ctl(loop.epoll_, EPOLL_CTL_ADD, fd, &ev);
  }
  return 0;
}

int CurlLoop::on_timer(CURLM*, long timeout_ms, void* shard_ptr) {
  auto* shard = static_cast<Shard*>(shard_ptr);
  shard->timer_due =
      timeout_ms < 0
          ? std::nullopt
          : std::optional(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms));
  return 0;
}

// An easy handle with the options every request of this dispatcher shares.
CURL* CurlLoop::new_easy() {
  CURL* e = curl_easy_init();
  if (e == nullptr) return nullptr;
  curl_easy_setopt(e, CURLOPT_URL, settings_.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  if (settings_.method != "POST") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, settings_.method.c_str());
  }
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(settings_.timeout_ms));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings_.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, settings_.tls_verify ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, settings_.tls_verify ? 2L : 0L);
  if (!settings_.tls_ca_file.empty()) {
    curl_easy_setopt(e, CURLOPT_CAINFO, settings_.tls_ca_file.c_str());
  }
  if (!settings_.tls_client_cert_file.empty()) {
    curl_easy_setopt(e, CURLOPT_SSLCERT, settings_.tls_client_cert_file.c_str());
    curl_easy_setopt(e, CURLOPT_SSLKEY, settings_.tls_client_key_file.c_str());
  }
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Transfer::on_body);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Transfer::on_header);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &CurlLoop::on_open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, this);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &CurlLoop::on_close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
  return e;
}

void CurlLoop::start(std::unique_ptr<Transfer> t) {
  CURL* e = nullptr;
  if (!idle_easy_.empty()) {
    e = idle_easy_.back();
    idle_easy_.pop_back();
  } else {
    e = new_easy();
  }
  if (e == nullptr) {
    t->answer.transport_error = "curl_easy_init failed";
    t->request.done(std::move(t->answer));
    return;
  }
  t->easy = e;
  t->shard = &shards_[next_shard_];
  next_shard_ = (next_shard_ + 1) % kShards;
  t->body_cap = settings_.answer_body_bytes();
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->request.body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->request.body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->link_headers());
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  if (curl_multi_add_handle(t->shard->multi, e) != CURLM_OK) {
    idle_easy_.push_back(e);
    t->answer.transport_error = "curl_multi_add_handle failed";
    t->request.done(std::move(t->answer));
    return;
  }
  in_flight_.emplace(e, std::move(t));
}

void CurlLoop::finish(Shard& shard, CURL* easy, CURLcode result) {
  auto it = in_flight_.find(easy);
  if (it == in_flight_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  in_flight_.erase(it);
  curl_multi_remove_handle(shard.multi, easy);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, nullptr);
  idle_easy_.push_back(easy);  // the next request reuses it (its connection stays cached)
  if (result != CURLE_OK) {
    t->answer.transport_error = curl_easy_strerror(result);
    if (t->error[0] != '\0') t->answer.transport_error += std::string(" (") + t->error + ")";
  } else {
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    t->answer.status = static_cast<int>(status);
  }
  t->request.done(std::move(t->answer));
}

void CurlLoop::read_done(Shard& shard) {
  int left = 0;
  while (CURLMsg* m = curl_multi_info_read(shard.multi, &left)) {
    if (m->msg == CURLMSG_DONE) finish(shard, m->easy_handle, m->data.result);
  }
}

void CurlLoop::run_due_timers() {
  const auto now = std::chrono::steady_clock::now();
  for (Shard& shard : shards_) {
    if (!shard.timer_due || now < *shard.timer_due) continue;
    shard.timer_due.reset();  // libcurl sets the next one from inside the call
    int running = 0;
    curl_multi_socket_action(shard.multi, CURL_SOCKET_TIMEOUT, 0, &running);
    read_done(shard);
  }
}

int CurlLoop::next_wait_ms() const {
  int64_t wait = 1000;
  const auto now = std::chrono::steady_clock::now();
  for (const Shard& shard : shards_) {
    if (!shard.timer_due) continue;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*shard.timer_due - now);
    wait = std::min<int64_t>(wait, std::max<int64_t>(left.count(), 0));
  }
  return static_cast<int>(wait);
}

void CurlLoop::run() {
  pthread_setname_np(pthread_self(), "http-transfer");  // as top -H and the status tools show it
  constexpr int kEvents = 256;
  epoll_event events[kEvents];
  for (;;) {
    std::vector<Request> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      batch.swap(submitted_);
    }
    for (auto& r : batch) {
      auto t = std::make_unique<Transfer>();
      t->request = std::move(r);
      start(std::move(t));
    }
    run_due_timers();  // a handle just added asks for a timeout of 0: it starts here
    const int n = ::epoll_wait(epoll_, events, kEvents, next_wait_ms());
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kWakeKey) {
        uint64_t count;
        (void)!::read(wake_, &count, sizeof count);
        continue;
      }
      const auto fd = static_cast<curl_socket_t>(key & 0xffffffffu);
      FdState& st = fd_state(fd);
      if (!st.wanted) {  // an idle cached connection: closed by the peer, or noise
        if (st.events != 0) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
        st.events = 0;
        continue;
      }
      Shard& shard = shards_[key >> 32];
      int flags = 0;
      if (events[i].events & EPOLLIN) flags |= CURL_CSELECT_IN;
      if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (events[i].events & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
      int running = 0;
      curl_multi_socket_action(shard.multi, fd, flags, &running);
      read_done(shard);
    }
    run_due_timers();
  }
  // Stopping: whatever is still in flight is dropped (each `done` destroyed uncalled; the SDK
  // turns a dropped Completion into a RETRY the host no longer waits for).
  for (auto& [easy, t] : in_flight_) {
    curl_multi_remove_handle(t->shard->multi, easy);
    curl_easy_cleanup(easy);
  }
  in_flight_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  submitted_.clear();
}

}  // namespace sqlstreams_http
