#include "common/url.hpp"

#include <regex>

namespace sqlstreams {

std::string mask_url(std::string_view url) {
  std::string s(url);
  static const std::regex kUriPassword(R"(^(postgres(?:ql)?://[^:@/]*:)[^@/]*@)");
  static const std::regex kKvPassword(R"((^|\s)(password\s*=\s*)('[^']*'|\S+))");
  static const std::regex kQueryPassword(R"(([?&]password=)[^&]*)");
  s = std::regex_replace(s, kUriPassword, "$1***@");
  s = std::regex_replace(s, kQueryPassword, "$1***");
  s = std::regex_replace(s, kKvPassword, "$1$2***");
  return s;
}

}  // namespace sqlstreams
