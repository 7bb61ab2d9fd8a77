# Run by ctest (tests/build_hygiene/CMakeLists.txt): -fsyntax-only compiles of one-line sources
# with a dependent's include view of a module. A public header must compile (the positive
# control: the view is complete); an internal one must not be found.
function(try_include view header expect)
  string(MAKE_C_IDENTIFIER "${header}" name)
  set(src ${WORK_DIR}/${name}.cpp)
  file(WRITE ${src} "#include \"${header}\"\n")
  set(flags "")
  foreach(dir IN LISTS view)
    if(dir)
      list(APPEND flags "-I${dir}")
    endif()
  endforeach()
  execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${flags} ${src}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(expect STREQUAL "compiles" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "${header}: a public header does not compile for a dependent:\n${out}")
  elseif(expect STREQUAL "hidden")
    if(rc EQUAL 0)
      message(FATAL_ERROR "${header}: an internal header is visible to a dependent")
    elseif(NOT out MATCHES "No such file or directory")
      message(FATAL_ERROR "${header}: failed for another reason than not being found:\n${out}")
    endif()
  endif()
  message(STATUS "${header}: ${expect}")
endfunction()

try_include("${STORE_VIEW}" "store/group/group_store.hpp" compiles)
try_include("${STORE_VIEW}" "store/produce/producer.hpp" compiles)
try_include("${STORE_VIEW}" "store/core/pq.hpp" hidden)
try_include("${STORE_VIEW}" "store/group/claim_plan.hpp" hidden)
try_include("${STORE_VIEW}" "consume/group_pipeline.hpp" hidden)  # store does not see consume
try_include("${CONSUME_VIEW}" "consume/backoff.hpp" hidden)
