#include "ops/http_server.hpp"

#include <civetweb.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <vector>

namespace sqlstreams::ops {
namespace {

// civetweb takes numeric addresses only; "localhost" means the IPv4 loopback.
std::string civetweb_ports(const std::string& listen) {
  if (listen.rfind("localhost:", 0) == 0) return "127.0.0.1:" + listen.substr(10);
  if (listen.rfind("*:", 0) == 0) return listen.substr(2);  // every address
  return listen;
}

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string url_decode(const std::string& s, bool form) {
  std::vector<char> buf(s.size() + 1);
  int n = mg_url_decode(s.c_str(), static_cast<int>(s.size()), buf.data(),
                        static_cast<int>(buf.size()), form ? 1 : 0);
  return n < 0 ? std::string() : std::string(buf.data(), static_cast<size_t>(n));
}

int log_message(const struct mg_connection*, const char* message) {
  spdlog::debug("http-server-message: {}", message);
  return 1;  // handled: civetweb writes nothing to stderr
}

}  // namespace

std::map<std::string, std::string> parse_query(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(start, end - start);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      std::string key = url_decode(pair.substr(0, eq), true);
      std::string value = eq == std::string::npos ? "" : url_decode(pair.substr(eq + 1), true);
      out[key] = value;
    }
    start = end + 1;
  }
  return out;
}

HttpServer::HttpServer(const std::string& listen, HttpHandler handler, HttpLimits limits)
    : listen_(listen), handler_(std::move(handler)) {
  mg_init_library(0);
  std::string ports = civetweb_ports(listen);
  const std::string nthreads = std::to_string(limits.threads);
  const std::string queue = std::to_string(limits.queue);
  const std::string backlog = std::to_string(limits.queue);
  const std::string timeout = std::to_string(limits.request_timeout.count());
  const char* options[] = {"listening_ports",
                           ports.c_str(),
                           "num_threads",
                           nthreads.c_str(),
                           "connection_queue",
                           queue.c_str(),
                           "listen_backlog",
                           backlog.c_str(),
                           "enable_keep_alive",
                           "no",
                           "request_timeout_ms",
                           timeout.c_str(),
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = &log_message;
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = this;
  init.configuration_options = options;
  char error_text[256] = {};
  unsigned error_code = 0;
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof error_text;
  ctx_ = mg_start2(&init, &error);
  if (ctx_ == nullptr) {
    throw HttpError(fmt::format("cannot serve HTTP on {} (host.http_listen): {}", listen,
                                error_text[0] ? error_text : "civetweb refused to start"));
  }
  mg_server_port server_ports[4] = {};
  if (mg_get_server_ports(ctx_, 4, server_ports) > 0) port_ = server_ports[0].port;
  mg_set_request_handler(ctx_, "/", &HttpServer::on_request, this);
}

HttpServer::~HttpServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

int HttpServer::on_request(struct mg_connection* conn, void* self) {
  auto* server = static_cast<HttpServer*>(self);
  const mg_request_info* info = mg_get_request_info(conn);
  HttpRequest request;
  request.method = info->request_method ? info->request_method : "";
  request.path = info->local_uri ? info->local_uri : "/";
  if (info->query_string) request.query = parse_query(info->query_string);
  HttpResponse response;
  if (request.method != "GET" && request.method != "HEAD") {
    response = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  } else {
    try {
      response = server->handler_(request);
    } catch (const std::exception& e) {
      response = {500, "text/plain; charset=utf-8", std::string("error: ") + e.what() + "\n"};
    }
  }
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            "Connection: close\r\n\r\n",
            response.status, reason(response.status), response.content_type.c_str(),
            response.body.size());
  if (request.method != "HEAD") mg_write(conn, response.body.data(), response.body.size());
  return response.status;
}

}  // namespace sqlstreams::ops
