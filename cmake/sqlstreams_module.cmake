# sqlstreams_module(<target> <folder> PUBLIC_HEADERS <header>...): the include discipline of a
# runtime module (CONTRIBUTING.md#repository-layout). Every runtime header is included by its path below runtime/
# (`#include "store/group/group_store.hpp"`). The module's own sources see its whole folder;
# every target that links it sees only the listed public headers (paths relative to
# runtime/<folder>). Both views are directories of symbolic links generated in the build tree:
#   module_include/private/<folder>/<folder> -> runtime/<folder>
#   module_include/public/<folder>/<folder>/<header> -> runtime/<folder>/<header>
# So a module reaches another module's header only by linking it, and only a public one: an
# internal header (store/core/pq.hpp, consume/backoff.hpp, ...) stays internal, and a new
# dependency shows up in a CMakeLists. A public header may include only public headers of its
# own module (a consumer's build fails otherwise). Tests are white-box: tests/ adds runtime/.
function(sqlstreams_module target folder)
  cmake_parse_arguments(arg "" "" "PUBLIC_HEADERS" ${ARGN})
  set(source ${PROJECT_SOURCE_DIR}/runtime/${folder})
  set(private_root ${CMAKE_BINARY_DIR}/module_include/private/${folder})
  set(public_root ${CMAKE_BINARY_DIR}/module_include/public/${folder})
  file(REMOVE_RECURSE ${private_root} ${public_root})
  file(MAKE_DIRECTORY ${private_root} ${public_root})
  file(CREATE_LINK ${source} ${private_root}/${folder} SYMBOLIC)
  foreach(header IN LISTS arg_PUBLIC_HEADERS)
    if(NOT EXISTS ${source}/${header})
      message(FATAL_ERROR "sqlstreams_module(${target}): public header runtime/${folder}/${header} "
                          "does not exist")
    endif()
    get_filename_component(dir ${public_root}/${folder}/${header} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${source}/${header} ${public_root}/${folder}/${header} SYMBOLIC)
  endforeach()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_include_directories(${target} PRIVATE ${private_root})
  else()
    target_include_directories(${target} PRIVATE ${private_root} INTERFACE ${public_root})
  endif()
endfunction()
