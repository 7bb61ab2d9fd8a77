// noop.so — handler `noop`: OK immediately, without decoding the payload (benchmarks measure
// the runtime, not JSON). Config (optional): record_file — one line
// "<group> <message id> <attempt> ok" per call, one write(2) on an O_APPEND descriptor.
// Threading: concurrent; the instance is immutable after construction.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sqlstreams/plugin.hpp>
#include <string>

namespace noop {

class Noop : public sqlstreams::TypedHandler<std::string_view> {
 public:
  static constexpr const char* kName = "noop";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) { record_path(config); }

  explicit Noop(const nlohmann::json& config) {
    const std::string path = record_path(config);
    if (path.empty()) return;
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw std::runtime_error("cannot open record_file '" + path + "': " + std::strerror(errno));
  }
  ~Noop() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Noop(const Noop&) = delete;
  Noop& operator=(const Noop&) = delete;

  sqlstreams::Result handle(const std::string_view& /*payload*/,
                            const sqlstreams::MessageContext& m) override {
    if (fd_ >= 0) {
      const std::string line = std::string(m.group) + " " + std::to_string(m.id) + " " +
                               std::to_string(m.attempt) + " ok\n";
      if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        return sqlstreams::retry(std::string("cannot append to record_file: ") +
                                 std::strerror(errno));
      }
    }
    return sqlstreams::ok();
  }

 private:
  static std::string record_path(const nlohmann::json& config) {
    sqlstreams::ConfigReader r(config);
    std::string path = r.get<std::string>("record_file", "");
    r.reject_unknown_keys();
    return path;
  }

  int fd_ = -1;
};

}  // namespace noop

SQLSTREAMS_PLUGIN("noop", "1.0.0", noop::Noop)
