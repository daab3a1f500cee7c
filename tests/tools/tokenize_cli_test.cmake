# latentserve-tokenize end to end: ids for a line match the HF oracle, --decode reverses them,
# and a bad id is reported with its line number; a Kimi model directory and a tiktoken.model
# load, control-token text is matched only when asked, and a decoded NUL reaches stdout.
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
# A model directory with a tiktoken.model (Kimi K3 style); ids from kimi_k3/vectors.jsonl.
execute_process(COMMAND ${BIN} --tokenizer ${DATA}/tokenizer/kimi_k3 INPUT_FILE ${OUT}/in.txt RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "39 791 78 11 1807 0\n")
  message(FATAL_ERROR "kimi_k3 encode gave '${out}' (${err})")
endif()
# Control-token text is plain text unless --special match; then <|open|> is control id 6003.
file(WRITE ${OUT}/ctl.txt "<|open|>\n")
execute_process(COMMAND ${BIN} --tokenizer ${DATA}/tokenizer/kimi_k3/tiktoken.model --special match INPUT_FILE ${OUT}/ctl.txt RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "6003\n")
  message(FATAL_ERROR "kimi_k3 --special match gave '${out}' (${err})")
endif()
execute_process(COMMAND ${BIN} --tokenizer ${DATA}/tokenizer/kimi_k3 INPUT_FILE ${OUT}/ctl.txt RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR out STREQUAL "6003\n")
  message(FATAL_ERROR "kimi_k3 default matched control text: '${out}' (${err})")
endif()
# Decoded text is written byte for byte: the ids of "a\0b" give 61 00 62 0a.
file(WRITE ${OUT}/nul.txt "64 188 65\n")
execute_process(COMMAND ${BIN} --tokenizer ${DATA}/tokenizer/kimi_k3 --decode INPUT_FILE ${OUT}/nul.txt OUTPUT_FILE ${OUT}/nul.out RESULT_VARIABLE rc)
file(READ ${OUT}/nul.out hex HEX)
if(NOT rc EQUAL 0 OR NOT hex STREQUAL "6100620a")
  message(FATAL_ERROR "decode of a NUL gave bytes ${hex}")
endif()
