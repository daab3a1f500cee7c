# decode_bench's command line: an unknown flag, a flag without its value and counts that are not
# whole numbers are refused by name with the usage (exit status 2) before anything runs; --help
# prints the usage; a valid command line still runs (the tiny model, a 4-token prefill, batch 1).
# cmake -DBIN=<decode_bench> -DSRC=<checkout> -P decode_bench_cli_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/expect_refused.cmake)
expect_refused(${BIN} "unknown flag '--bogus'" --bogus)
expect_refused(${BIN} "unknown flag '--prefil'" --prefil 8)
expect_refused(${BIN} "--prefill needs a value" --prefill)
expect_refused(${BIN} "--prefill 'abc': expected a whole number" --prefill abc)
expect_refused(${BIN} "--repeat '0': expected a whole number" --repeat 0)
expect_refused(${BIN} "threads 'two': expected a whole number" two)
expect_refused(${BIN} "batch '0': expected a whole number" 1 - 0)
expect_refused(${BIN} "batch '8x': expected a whole number" 1 - 8x)
expect_refused(${BIN} "--quantization 'int3' is not one of" --quantization int3)
expect_refused(${BIN} "--int4 '12': expected a group size, a multiple of 8" --int4 12)
expect_refused(${BIN} "--mxfp4 and --int4 are two formats" --mxfp4 --int4 32)
expect_refused(${BIN} "--int4_zero_points needs --int4 GROUP" --int4_zero_points)

execute_process(COMMAND ${BIN} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: decode_bench")
  message(FATAL_ERROR "decode_bench --help: expected the usage and exit 0, got ${rc}:\n${out}${err}")
endif()

execute_process(COMMAND ${BIN} --prefill 4 1 ${SRC}/models/tiny 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "decode_bench on the tiny model failed (${rc}):\n${err}")
endif()
string(JSON prefill GET "${out}" prefill_tokens)
# int8 activations on a model without integer weights: refused once loaded, as the server does.
execute_process(COMMAND ${BIN} --activation_dtype int8 1 ${SRC}/models/tiny 1 RESULT_VARIABLE rc2 ERROR_VARIABLE err2)
if(rc2 EQUAL 0 OR NOT err2 MATCHES "--activation_dtype int8: none of this model's GEMM weights are int8 or int4")
  message(FATAL_ERROR "decode_bench --activation_dtype int8 on a float model: expected the refusal, got ${rc2}:\n${err2}")
endif()
string(JSON batch GET "${out}" results 0 batch)
if(NOT prefill EQUAL 4 OR NOT batch EQUAL 1)
  message(FATAL_ERROR "decode_bench did not run what it was asked: ${out}")
endif()
