# latentserve-tokenize end to end: ids for a line match the HF oracle, --decode reverses them,
# and a bad id is reported with its line number.
cmake_policy(SET CMP0053 NEW)
set(TOK ${DATA}/tokenizer/gpt2_4096/tokenizer.json)
file(MAKE_DIRECTORY ${OUT})
file(WRITE ${OUT}/in.txt "Hello, world!\n")
execute_process(COMMAND ${BIN} --tokenizer ${TOK} INPUT_FILE ${OUT}/in.txt RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
# From tests/data/tokenizer/gpt2_4096/vectors.jsonl ("Hello, world!").
if(NOT rc EQUAL 0 OR NOT out STREQUAL "42 539 81 14 909 3\n")
  message(FATAL_ERROR "encode gave '${out}' (${err})")
endif()
file(WRITE ${OUT}/ids.txt "42 539 81 14 909 3\n5 x\n")
execute_process(COMMAND ${BIN} --tokenizer ${TOK} --decode INPUT_FILE ${OUT}/ids.txt RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT out STREQUAL "Hello, world!\n\n" OR rc EQUAL 0 OR NOT err MATCHES "line 2: 'x' is not an id")
  message(FATAL_ERROR "decode gave '${out}' rc=${rc} (${err})")
endif()
