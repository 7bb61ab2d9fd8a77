#include "common/host_name.hpp"

#include <unistd.h>

namespace sqlstreams {

std::string machine_host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

}  // namespace sqlstreams
