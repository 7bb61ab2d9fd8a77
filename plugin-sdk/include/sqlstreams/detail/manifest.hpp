// sqlstreams/detail/manifest.hpp — the static manifest written by SQLSTREAMS_PLUGIN (not for
// authors; included by sqlstreams/plugin.hpp). Owns the handler descriptors, the array of
// pointers to them and the sqlstreams_type_manifest, all built once on the first entry call.
// Threading: immutable after construction (a function-local static: thread-safe init).
#pragma once

#include <sqlstreams/plugin.h>

#include <cstddef>

#include "sqlstreams/detail/adapter.hpp"

#pragma GCC visibility push(hidden)
namespace sqlstreams::detail {

#define SQLSTREAMS_DETAIL_STR2(x) #x
#define SQLSTREAMS_DETAIL_STR(x) SQLSTREAMS_DETAIL_STR2(x)
#define SQLSTREAMS_DETAIL_ABI \
  SQLSTREAMS_DETAIL_STR(SQLSTREAMS_ABI_MAJOR) "." SQLSTREAMS_DETAIL_STR(SQLSTREAMS_ABI_MINOR)
inline constexpr const char kSdkBuild[] =
    "sqlstreams-plugin-sdk " SQLSTREAMS_SDK_VERSION " (ABI " SQLSTREAMS_DETAIL_ABI
    ")"
#if defined(__VERSION__)
    " compiler " __VERSION__
#endif
    ;

// The static manifest behind SQLSTREAMS_PLUGIN; built once, on the first call of the entry.
template <class... Handlers>
class Manifest {
  static_assert(sizeof...(Handlers) > 0, "SQLSTREAMS_PLUGIN needs at least one handler");

 public:
  Manifest(const char* name, const char* version) noexcept
      : descriptors_{Adapter<Handlers>::descriptor()...} {
    for (size_t i = 0; i < sizeof...(Handlers); ++i) pointers_[i] = &descriptors_[i];
    manifest_.magic = SQLSTREAMS_PLUGIN_MAGIC;
    manifest_.struct_size = sizeof(sqlstreams_type_manifest);
    manifest_.abi_major = SQLSTREAMS_ABI_MAJOR;
    manifest_.abi_minor = SQLSTREAMS_ABI_MINOR;
    manifest_.plugin_name = name;
    manifest_.plugin_version = version;
    manifest_.sdk_build = kSdkBuild;
    manifest_.handlers = pointers_;
    manifest_.handler_count = sizeof...(Handlers);
  }
  const sqlstreams_type_manifest* get() const noexcept { return &manifest_; }

 private:
  sqlstreams_type_handler descriptors_[sizeof...(Handlers)];
  const sqlstreams_type_handler* pointers_[sizeof...(Handlers)] = {};
  sqlstreams_type_manifest manifest_{};
};

}  // namespace sqlstreams::detail
#pragma GCC visibility pop
