# The benchmark programs' positional arguments (bench/positional_args.h): a count that is not a
# whole number in its range, an unknown flag and an argument left over are refused by name with the
# usage (exit status 2) before anything runs; --help prints the usage; a valid line still runs.
# cmake -DBINDIR=<build/bin> -DWITH_MPI=ON|OFF -P bench_args_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/expect_refused.cmake)
expect_refused(${BINDIR}/gemm_bench "N must be a whole number in \\[1, 1048576\\], got 'abc'" abc)
expect_refused(${BINDIR}/gemm_bench "K must be a whole number in \\[1, 1048576\\], got '0'" 64 0)
expect_refused(${BINDIR}/gemm_bench "unexpected argument '3'" 1 2 3)
expect_refused(${BINDIR}/gemm_bench "unknown flag --bogus" --bogus)
expect_refused(${BINDIR}/attention_bench "HEAD_DIM must be a whole number" 2 8 80 4 2 64x)
expect_refused(${BINDIR}/attention_kinds_bench "ROUNDS must be a whole number in \\[1, 1000\\], got '0'" 2 512 0)
expect_refused(${BINDIR}/prefix_cache_bench "SYSTEM_TOKENS must be a whole number" 2 3 lots)
expect_refused(${BINDIR}/speculative_bench "K must be a whole number in \\[1, 64\\], got '-1'" models/tiny 5 -1)
expect_refused(${BINDIR}/speculative_bench "STREAMS must be a whole number in \\[1, 256\\], got '0'" models/tiny 5 4 64 mtp 0)
set(benches gemm_bench attention_bench attention_kinds_bench prefix_cache_bench speculative_bench serving_bench
    placement_bench structured_output_bench chat_template_bench)
if(WITH_MPI)  # built with MPI only
  expect_refused(${BINDIR}/rank_exchange_bench "TENSOR_PARALLEL must be a whole number" models/tiny 5 two)
  list(APPEND benches rank_exchange_bench)
endif()
expect_refused(${BINDIR}/serving_bench "unexpected argument 'x'" dir auto x)
expect_refused(${BINDIR}/placement_bench "unexpected argument 'x'" . x)
expect_refused(${BINDIR}/structured_output_bench "unknown flag --model" --model x)
expect_refused(${BINDIR}/chat_template_bench "unexpected argument 'x'" dir x)

foreach(bench ${benches})
  execute_process(COMMAND ${BINDIR}/${bench} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: ${bench}")
    message(FATAL_ERROR "${bench} --help: expected the usage and exit 0, got ${rc}:\n${out}${err}")
  endif()
endforeach()

execute_process(COMMAND ${BINDIR}/gemm_bench 64 64 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gemm_bench 64 64 failed (${rc}):\n${err}")
endif()
string(JSON n GET "${out}" N)
if(NOT n EQUAL 64)
  message(FATAL_ERROR "gemm_bench 64 64 reported N ${n}")
endif()
