# expect_refused(PROGRAM PATTERN ARGS...): PROGRAM (a path) run with ARGS must exit with status 2,
# its stderr matching PATTERN and giving its usage ("usage: <program's file name>"). Included by the
# command-line tests of the benchmark programs.
function(expect_refused program pattern)
  get_filename_component(name ${program} NAME)
  execute_process(COMMAND ${program} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${pattern}" OR NOT err MATCHES "usage: ${name}")
    message(FATAL_ERROR "${name} ${ARGN}: expected exit 2 naming '${pattern}' with the usage, got ${rc}:\n${err}\n${out}")
  endif()
endfunction()
