// common/errors — the control-plane error zone (docs/design.md#errors-and-trust): typed exceptions
// that main() maps to exit codes. Data-plane code never throws these across a worker iteration.
// Threading: value types.
#pragma once

#include <stdexcept>
#include <string>

namespace sqlstreams {

enum class ExitCode : int {
  kOk = 0,
  kOther = 1,
  kConfig = 2,
  kPlugin = 3,
  kDatabase = 4,
  kUsage = 64,
  kData = 65,  // bad input data (EX_DATAERR)
};

// An error the operator must act on; `hint` says what to do.
class ControlPlaneError : public std::runtime_error {
 public:
  ControlPlaneError(ExitCode code, std::string message, std::string hint = {})
      : std::runtime_error(std::move(message)), code_(code), hint_(std::move(hint)) {}
  ExitCode code() const { return code_; }
  const std::string& hint() const { return hint_; }

 private:
  ExitCode code_;
  std::string hint_;
};

}  // namespace sqlstreams
