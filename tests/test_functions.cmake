# ls_test(NAME SOURCES ... LIBS ... LABELS ...): a GoogleTest binary whose tests ctest discovers, with
# the test data directory and the checkout's include root. Included by tests/ and by the
# kernels-only configuration.
if(NOT LS_TEST_DATA_DIR)
  set(LS_TEST_DATA_DIR ${PROJECT_SOURCE_DIR}/tests/data)
endif()
# thread_safety_tests: every binary the TSan pass runs (tools/sanitize.sh builds only these).
if(NOT TARGET thread_safety_tests)
  add_custom_target(thread_safety_tests)
endif()
function(ls_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE LS_TEST_DATA_DIR="${LS_TEST_DATA_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  # A binary of several sources compiles them in batches: GoogleTest's and the project's headers
  # are parsed once per batch, not once per source (about half the suite's compile time).
  ls_batch_sources(${name} 8)
  if(LATENTSERVE_SANITIZE OR CMAKE_CROSSCOMPILING)
    # Where a process is costly to start and end — under a sanitizer (~0.07 s: the runtime's set-up,
    # the leak check at exit) or an emulator (~0.25 s under qemu), over a thousand tests — each
    # binary runs whole, in two shards (GoogleTest's own sharding), and its log names any failing
    # test. Elsewhere ctest runs each GoogleTest test as a test of its own.
    foreach(shard 0 1)
      add_test(NAME ${name}_shard${shard} COMMAND ${name})
      set_tests_properties(${name}_shard${shard} PROPERTIES LABELS "${T_LABELS}"
                           ENVIRONMENT "GTEST_TOTAL_SHARDS=2;GTEST_SHARD_INDEX=${shard}")
    endforeach()
  else()
    gtest_discover_tests(${name} PROPERTIES LABELS "${T_LABELS}" DISCOVERY_TIMEOUT 120)
  endif()
  if("thread_safety" IN_LIST T_LABELS)
    add_dependencies(thread_safety_tests ${name})
  endif()
endfunction()
