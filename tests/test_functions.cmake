# ls_test(NAME SOURCES ... LIBS ... LABELS ...): a GoogleTest binary whose tests ctest discovers, with
# the test data directory and the checkout's include root. Included by tests/ and by the
# kernels-only configuration.
if(NOT LS_TEST_DATA_DIR)
  set(LS_TEST_DATA_DIR ${PROJECT_SOURCE_DIR}/tests/data)
endif()
function(ls_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE LS_TEST_DATA_DIR="${LS_TEST_DATA_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  gtest_discover_tests(${name} PROPERTIES LABELS "${T_LABELS}" DISCOVERY_TIMEOUT 120)
endfunction()
