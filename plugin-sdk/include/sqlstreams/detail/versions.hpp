// sqlstreams/detail/versions.hpp — the payload-version machinery of the C++ layer (not for
// authors; included by detail/adapter.hpp): which payload types a handler lists
// (sqlstreams::Versions, `using Payloads`), their schema version table for the descriptor
// (checked at compile time: >= 1, increasing, at most SQLSTREAMS_MAX_SCHEMA_VERSIONS), and the
// upcast chain to the newest type.
// Threading: compile-time tables and pure functions.
#pragma once

#include <sqlstreams/plugin.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#pragma GCC visibility push(hidden)
namespace sqlstreams::detail {

// The payload types a handler understands: H::Payloads when it declares one, else its one
// payload_type at H::kSchemaVersion.
template <class H>
struct PayloadsOf {
  using type = Versions<typename H::payload_type>;
  static constexpr bool kListed = false;
};
template <class H>
requires requires { typename H::Payloads; }
struct PayloadsOf<H> {
  using type = typename H::Payloads;
  static constexpr bool kListed = true;
};

template <class T, class... Ts>
constexpr size_t index_of() {
  constexpr bool same[] = {std::is_same_v<T, Ts>...};
  for (size_t i = 0; i < sizeof...(Ts); ++i) {
    if (same[i]) return i;
  }
  return sizeof...(Ts);
}

template <class Listed>
struct VersionTable;
template <class... Ts>
struct VersionTable<Versions<Ts...>> {
  using Newest = std::tuple_element_t<sizeof...(Ts) - 1, std::tuple<Ts...>>;
  static constexpr int32_t kVersions[] = {static_cast<int32_t>(Ts::kSchemaVersion)...};
  static constexpr bool increasing() {
    for (size_t i = 0; i < sizeof...(Ts); ++i) {
      if (kVersions[i] < 1 || (i > 0 && kVersions[i] <= kVersions[i - 1])) return false;
    }
    return true;
  }
  static_assert(sizeof...(Ts) <= SQLSTREAMS_MAX_SCHEMA_VERSIONS, "too many payload versions");
  static_assert(increasing(),
                "Versions<...>: each type's kSchemaVersion must be >= 1 and larger than the one "
                "before it (list the oldest first)");
};

// "1, 2, 5": the versions of a list, for error text.
template <class Listed>
std::string declared_versions() {
  std::string out;
  for (int32_t v : VersionTable<Listed>::kVersions) {
    out += (out.empty() ? "" : ", ") + std::to_string(v);
  }
  return out;
}

// Upcasts `value` (a type of the list) with the handler's upcast() until it is the newest:
// Payload. Each upcast must return a later type of the list (checked at compile time).
template <class Payload, class H, class... Ts, class T>
Payload to_newest(H& handler, T&& value, Versions<Ts...>*) {
  using V = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<V, Payload>) {
    return std::forward<T>(value);
  } else {
    static_assert(
        requires { handler.upcast(value); },
        "a handler with Payloads declares upcast(const Old&) for every type but the newest");
    using Next = std::remove_cvref_t<decltype(handler.upcast(value))>;
    static_assert(
        index_of<Next, Ts...>() < sizeof...(Ts) && index_of<Next, Ts...>() > index_of<V, Ts...>(),
        "upcast(const Old&) must return a later type of the handler's Payloads");
    return to_newest<Payload>(handler, handler.upcast(value),
                              static_cast<Versions<Ts...>*>(nullptr));
  }
}

}  // namespace sqlstreams::detail
#pragma GCC visibility pop
