// plugins/http — the transfers in flight: one thread drives libcurl's multi interface
// (connection reuse, keep-alive, HTTP/2 where the server offers it), so one handler instance
// holds thousands of requests without a thread each. submit() hands a request over from any
// thread; the dispatcher thread runs it and calls its `done` with the Answer (once, on the
// dispatcher thread). Destroying the dispatcher stops its thread and drops what is in flight
// (each `done` is destroyed uncalled).
#pragma once

#include <curl/curl.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "outcome.hpp"
#include "settings.hpp"

namespace sqlstreams_http {

struct Request {
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  std::function<void(Answer)> done;
};

class CurlDispatcher {
 public:
  explicit CurlDispatcher(const Settings& settings);
  ~CurlDispatcher();
  CurlDispatcher(const CurlDispatcher&) = delete;
  CurlDispatcher& operator=(const CurlDispatcher&) = delete;

  void submit(Request request);

 private:
  struct Transfer;
  void run();
  void start(std::unique_ptr<Transfer> t);
  void finish(CURL* easy, CURLcode result);

  const Settings& settings_;
  CURLM* multi_ = nullptr;
  std::unordered_map<CURL*, std::unique_ptr<Transfer>> in_flight_;  // dispatcher thread only
  std::mutex mu_;
  std::vector<Request> submitted_;  // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::thread thread_;              // last: starts after everything above exists
};

}  // namespace sqlstreams_http
