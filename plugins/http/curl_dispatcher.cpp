#include "curl_dispatcher.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <strings.h>

namespace sqlstreams_http {
namespace {

std::once_flag curl_global;

}  // namespace

struct CurlDispatcher::Transfer {
  Request request;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  Answer answer;
  size_t body_cap = 0;
  char error[CURL_ERROR_SIZE] = {};

  ~Transfer() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }

  static size_t on_body(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    const size_t bytes = size * n;
    const size_t room = t->body_cap > t->answer.body.size() ? t->body_cap - t->answer.body.size()
                                                            : 0;
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

CurlDispatcher::CurlDispatcher(const Settings& settings) : settings_(settings) {
  std::call_once(curl_global, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  multi_ = curl_multi_init();
  if (multi_ == nullptr) throw std::runtime_error("http: curl_multi_init failed");
  thread_ = std::thread([this] { run(); });
}

CurlDispatcher::~CurlDispatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  curl_multi_wakeup(multi_);
  thread_.join();
  curl_multi_cleanup(multi_);
}

void CurlDispatcher::submit(Request request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_.push_back(std::move(request));
  }
  curl_multi_wakeup(multi_);
}

void CurlDispatcher::start(std::unique_ptr<Transfer> t) {
  CURL* e = curl_easy_init();
  if (e == nullptr) {
    t->answer.transport_error = "curl_easy_init failed";
    t->request.done(std::move(t->answer));
    return;
  }
  t->easy = e;
  t->body_cap = settings_.answers.error_body_bytes;
  for (const auto& h : t->request.headers) t->headers = curl_slist_append(t->headers, h.c_str());
  curl_easy_setopt(e, CURLOPT_URL, settings_.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  if (settings_.method != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, settings_.method.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->request.body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(t->request.body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(settings_.timeout_ms));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings_.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, settings_.tls_verify ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, settings_.tls_verify ? 2L : 0L);
  if (!settings_.tls_ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, settings_.tls_ca_file.c_str());
  if (!settings_.tls_client_cert_file.empty()) {
    curl_easy_setopt(e, CURLOPT_SSLCERT, settings_.tls_client_cert_file.c_str());
    curl_easy_setopt(e, CURLOPT_SSLKEY, settings_.tls_client_key_file.c_str());
  }
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Transfer::on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Transfer::on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  if (curl_multi_add_handle(multi_, e) != CURLM_OK) {
    t->answer.transport_error = "curl_multi_add_handle failed";
    t->request.done(std::move(t->answer));
    return;
  }
  in_flight_.emplace(e, std::move(t));
}

void CurlDispatcher::finish(CURL* easy, CURLcode result) {
  auto it = in_flight_.find(easy);
  if (it == in_flight_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  in_flight_.erase(it);
  curl_multi_remove_handle(multi_, easy);
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

void CurlDispatcher::run() {
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
    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg == CURLMSG_DONE) finish(m->easy_handle, m->data.result);
    }
    curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
  }
  // Stopping: whatever is still in flight is dropped (each `done` destroyed uncalled; the SDK
  // turns a dropped Completion into a RETRY the host no longer waits for).
  for (auto& [easy, t] : in_flight_) curl_multi_remove_handle(multi_, easy);
  in_flight_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  submitted_.clear();
}

}  // namespace sqlstreams_http
