# sqlstreams_add_plugin(<target> [SOURCES] src... [OUTPUT_DIRECTORY dir] [EXTRA_EXPORTS sym...])
# Builds a handler plugin: a MODULE library named <target>.so (OUTPUT_NAME may rename it; no
# "lib" prefix), linked against the SDK only — sqlstreams::plugin_sdk (the C++ layer) when a
# source is C++, else sqlstreams::plugin_sdk_c (plain C, no nlohmann_json) — compiled with
# hidden visibility and linked with a version script so the ONLY dynamic symbol is the entry
# function sqlstreams_plugin_manifest_v<N> (plus EXTRA_EXPORTS, for test hooks). Output goes to
# OUTPUT_DIRECTORY, else SQLSTREAMS_PLUGIN_OUTPUT_DIR, else ${CMAKE_BINARY_DIR}/plugins.
function(sqlstreams_add_plugin target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT_DIRECTORY" "SOURCES;EXTRA_EXPORTS")
  set(sources ${arg_SOURCES} ${arg_UNPARSED_ARGUMENTS})
  if(NOT sources)
    message(FATAL_ERROR "sqlstreams_add_plugin(${target}): no SOURCES given")
  endif()
  set(out_dir ${arg_OUTPUT_DIRECTORY})
  if(NOT out_dir)
    set(out_dir ${SQLSTREAMS_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT out_dir)
    set(out_dir ${CMAKE_BINARY_DIR}/plugins)
  endif()

  # Everything but the entry function stays local, including the weak/unique symbols of
  # std:: template instances that -fvisibility=hidden alone would still export.
  set(exports "sqlstreams_plugin_manifest_v*;")
  foreach(sym ${arg_EXTRA_EXPORTS})
    string(APPEND exports " ${sym};")
  endforeach()
  set(map ${CMAKE_CURRENT_BINARY_DIR}/${target}.exports.map)
  file(CONFIGURE OUTPUT ${map} CONTENT "{\n  global: ${exports}\n  local: *;\n};\n")

  set(sdk sqlstreams::plugin_sdk_c)
  foreach(src ${sources})
    if(src MATCHES "\\.(cpp|cc|cxx|C|c\\+\\+)$")
      set(sdk sqlstreams::plugin_sdk)
    endif()
  endforeach()
  if(NOT TARGET ${sdk})
    message(FATAL_ERROR "sqlstreams_add_plugin(${target}): C++ sources need ${sdk}, the SDK's C++ "
      "layer, which needs nlohmann_json 3 (Debian: apt install nlohmann-json3-dev; then ask for "
      "it with find_package(SQLStreamsPluginSDK 1 REQUIRED COMPONENTS CXX))")
  endif()
  add_library(${target} MODULE ${sources})
  target_link_libraries(${target} PRIVATE ${sdk})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    SUFFIX ".so"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    LINK_DEPENDS ${map}
    LIBRARY_OUTPUT_DIRECTORY ${out_dir})
  # The host refuses a plugin its group may write, or one in such a folder: whatever the umask
  # (0002 is the default for users on Ubuntu and Fedora), every link leaves the .so and its
  # output folder writable by their owner only.
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND chmod go-w $<TARGET_FILE:${target}> $<TARGET_FILE_DIR:${target}>
    VERBATIM)
endfunction()
