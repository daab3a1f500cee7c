# latentserve-calibrate end to end on the tiny model: documents longer than the context (whole
# pages of text on one line each) are split into windows, the windows and tokens used are
# reported, and the balance before and after is shown on the calibration set and on held-out
# text; an empty prompt file gets one clear error; --placement_out writes an expert placement
# planned from the calibrated load served as traffic is (each window continued by 32 tokens),
# which expects to beat the uniform one, and --placement_max_tokens outside the context is
# refused. A Kimi K3 directory (language_model. names, a vision tower, tiktoken) calibrates too,
# its biases written back under their own names.
# cmake -DBIN=<latentserve-calibrate> -DSRC=<checkout> -DOUT=<scratch dir> -P calibrate_cli_test.cmake
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
# Two documents of this project's own prose, each one line of well over 256 tokens.
file(READ ${SRC}/docs/quantile-balancing.md doc1 LIMIT 5000)
file(READ ${SRC}/docs/deploy.md doc2 LIMIT 3000)
file(READ ${SRC}/docs/reliability.md held LIMIT 3000)
foreach(v doc1 doc2 held)
  string(REGEX REPLACE "[\r\n]+" " " ${v} "${${v}}")
endforeach()
file(WRITE ${OUT}/prompts.txt "${doc1}\n\n${doc2}\n")
file(WRITE ${OUT}/heldout.txt "${held}\n")
execute_process(COMMAND ${BIN} --model ${SRC}/models/tiny --prompts ${OUT}/prompts.txt --heldout ${OUT}/heldout.txt
                        --out ${OUT}/model --iters 3 --threads 2 --placement_out ${OUT}/placement.json
                        --devices 4 --expert_slots 18
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "calibration on long documents failed (${rc}): ${err}")
endif()
string(JSON docs GET "${out}" calibration documents)
string(JSON windows GET "${out}" calibration windows)
string(JSON tokens GET "${out}" calibration tokens)
string(JSON held_windows GET "${out}" heldout windows)
if(NOT docs EQUAL 2 OR windows LESS 4 OR tokens LESS 900 OR held_windows LESS 2)
  message(FATAL_ERROR "unexpected windows: ${out}")
endif()
if(NOT err MATCHES "calibration set: 2 documents, ${windows} windows of at most 256 tokens, ${tokens} tokens"
   OR NOT err MATCHES "held-out set: +1 documents" OR NOT err MATCHES "held-out before -> after")
  message(FATAL_ERROR "the summary does not say what was used and bought:\n${err}")
endif()
string(JSON layers LENGTH "${out}" layers)
math(EXPR last "${layers} - 1")
foreach(i RANGE ${last})
  string(JSON before GET "${out}" layers ${i} max_over_mean_before)
  string(JSON after GET "${out}" layers ${i} max_over_mean_after)
  string(JSON held_before GET "${out}" layers ${i} heldout_max_over_mean_before)
  if(NOT after LESS before)
    message(FATAL_ERROR "layer ${i}: calibration did not even the load on its own text: ${before} -> ${after}")
  endif()
endforeach()
string(JSON planned GET "${out}" placement expected_device_max_over_mean)
string(JSON uniform GET "${out}" placement uniform_expected_device_max_over_mean)
string(JSON written GET "${out}" placement max_tokens)
if(NOT planned LESS uniform OR NOT written EQUAL 32 OR NOT err MATCHES "wrote ${OUT}/placement.json: expected device max/mean")
  message(FATAL_ERROR "the planned placement does not expect to beat uniform: ${planned} vs ${uniform}\n${err}")
endif()
file(READ ${OUT}/placement.json placement)
string(JSON devices GET "${placement}" num_devices)
string(JSON slots GET "${placement}" slots_per_device)
string(JSON placed_layers LENGTH "${placement}" layers)
if(NOT devices EQUAL 4 OR NOT slots EQUAL 18 OR NOT placed_layers EQUAL 4)
  message(FATAL_ERROR "unexpected placement file: ${placement}")
endif()
if(NOT EXISTS ${OUT}/model/model.safetensors OR NOT EXISTS ${OUT}/model/tokenizer.json)
  message(FATAL_ERROR "no model written to ${OUT}/model")
endif()
# Kimi K3: the biases go back under their language_model. names, in the checkpoint's dtype.
execute_process(COMMAND ${BIN} --model ${SRC}/tests/data/k3/k3_tiny_bf16 --prompts ${OUT}/heldout.txt
                        --out ${OUT}/k3 --iters 3 --threads 2
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err MATCHES "1 weight file\\(s\\) rewritten")
  message(FATAL_ERROR "calibration of a K3 directory failed (${rc}): ${err}")
endif()
file(READ ${OUT}/k3/model.safetensors header OFFSET 8 LIMIT 100000)  # past the header length
if(NOT header MATCHES "language_model.model.layers.5.block_sparse_moe.gate.e_score_correction_bias\"[^}]*F32"
   OR NOT EXISTS ${OUT}/k3/tiktoken.model)
  message(FATAL_ERROR "the K3 biases were not written back under their names")
endif()
string(JSON layers LENGTH "${out}" layers)
if(NOT layers EQUAL 5)
  message(FATAL_ERROR "K3 has 5 MoE layers, calibration reported ${layers}")
endif()
# No text: one clear error, whether the file is empty or holds only blank lines.
foreach(content "" "\n\n\n")
  file(WRITE ${OUT}/empty.txt "${content}")
  execute_process(COMMAND ${BIN} --model ${SRC}/models/tiny --prompts ${OUT}/empty.txt --out ${OUT}/model2
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "empty.txt: no text to calibrate on")
    message(FATAL_ERROR "an empty prompt file was not refused clearly: ${err}")
  endif()
endforeach()
# The tokens written after each window must leave the context room for a prompt.
foreach(tokens -1 256)
  execute_process(COMMAND ${BIN} --model ${SRC}/models/tiny --prompts ${OUT}/prompts.txt --out ${OUT}/model3
                          --placement_out ${OUT}/p3.json --devices 4 --placement_max_tokens=${tokens}
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "--placement_max_tokens must be within \\[0, 256\\)")
    message(FATAL_ERROR "--placement_max_tokens ${tokens} was not refused clearly: ${err}")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
