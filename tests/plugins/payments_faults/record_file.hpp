// payments_faults/record_file — test support shared by both handlers: an optional file that gets
// one line "<group> <message id> <attempt> <outcome>\n" per call, written with a single write(2) on
// an O_APPEND descriptor so several host processes can share one file; and simulated work.
// Threading: RecordFile::append is safe from many threads (one write per line).
#pragma once

#include <cstdint>
#include <sqlstreams/plugin.hpp>
#include <string>
#include <string_view>

namespace payments_faults {

class RecordFile {
 public:
  // Empty path: records nothing. Throws std::runtime_error when the file cannot be opened.
  explicit RecordFile(const std::string& path);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  void append(const sqlstreams::MessageContext& m, std::string_view outcome) const;

 private:
  int fd_ = -1;
};

void sleep_ms(int64_t ms);

// Returns once `path` exists (polls every 10 ms): a gate a test opens by creating the file.
void wait_for_file(const std::string& path);

}  // namespace payments_faults
