# Build options shared by every target of this repository (included by the top CMakeLists):
#   SQLSTREAMS_SANITIZERS  "" | "address,undefined" (preset asan) | "thread" (preset tsan)
#   SQLSTREAMS_WERROR      warnings are errors (presets asan and tsan, hence CI)
# and sqlstreams_warnings, the interface target that carries the warning flags. It is linked
# into every library, executable and plugin built here by sqlstreams_apply_warnings(), called
# once after every subdirectory is added, so a new target cannot miss it. Third-party headers
# come in as system includes and stay quiet.
set(SQLSTREAMS_SANITIZERS "" CACHE STRING
    "Sanitizers to build with: empty, address,undefined or thread")
set_property(CACHE SQLSTREAMS_SANITIZERS PROPERTY STRINGS "" "address,undefined" "thread")
option(SQLSTREAMS_WERROR "Treat compiler warnings as errors" OFF)

if(SQLSTREAMS_SANITIZERS STREQUAL "address,undefined")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(SQLSTREAMS_SANITIZERS STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT SQLSTREAMS_SANITIZERS STREQUAL "")
  message(FATAL_ERROR "SQLSTREAMS_SANITIZERS=\"${SQLSTREAMS_SANITIZERS}\": use \"\", "
                      "\"address,undefined\" or \"thread\" (ASan and TSan cannot be combined)")
endif()

add_library(sqlstreams_warnings INTERFACE)
target_compile_options(sqlstreams_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wno-missing-field-initializers
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Woverloaded-virtual>
  $<$<BOOL:${SQLSTREAMS_WERROR}>:-Werror>
  # GCC 12 reports false positives in libstdc++ (std::regex's std::function) under -O1 and
  # the sanitizers: kept visible, never fatal.
  $<$<BOOL:${SQLSTREAMS_WERROR}>:-Wno-error=maybe-uninitialized>)

function(_sqlstreams_targets_in dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _sqlstreams_targets_in("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(sqlstreams_apply_warnings)
  _sqlstreams_targets_in("${PROJECT_SOURCE_DIR}" targets)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      target_link_libraries(${t} PRIVATE sqlstreams_warnings)
    endif()
  endforeach()
endfunction()

# Unity builds (presets asan and tsan, hence CI): the sources of a target are compiled in
# batches of SQLSTREAMS_UNITY_BATCH, so the heavy headers (libpqxx, spdlog, nlohmann, Boost)
# are parsed once a batch, not once a file. runtime/ turns it on for its libraries.
option(SQLSTREAMS_UNITY_BUILD "Compile the runtime libraries as unity batches" OFF)
set(SQLSTREAMS_UNITY_BATCH 8 CACHE STRING "source files per unity batch")
