# ls_test_util (the model tests' fixtures and goldens) and the .npy reader it needs; included by
# tests/ and by the kernels-only configuration when it builds the end-to-end CUDA model test.
if(NOT TARGET ls_npy)
  add_library(ls_npy ${PROJECT_SOURCE_DIR}/tools/npy.cc)
  target_include_directories(ls_npy PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(ls_npy PUBLIC absl::status absl::statusor absl::strings)
endif()
set(LS_TEST_DATA_DIR ${PROJECT_SOURCE_DIR}/tests/data)
add_library(ls_test_util ${PROJECT_SOURCE_DIR}/tests/test_util.cc)
target_include_directories(ls_test_util PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(ls_test_util PUBLIC ls_models ls_npy GTest::gtest)
target_compile_definitions(ls_test_util PRIVATE LS_TEST_DATA_DIR="${LS_TEST_DATA_DIR}")
