# The integration tests' Python environment: tools/python_env.sh makes a venv from nothing
# (Debian's packages only here: no network needed), and tools/test_python.sh reports a test
# skipped (exit 77), naming tools/test.sh, when the venv is missing.
# cmake -DSRC=<checkout> -DOUT=<scratch dir> -P python_env_test.cmake
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND bash ${SRC}/tools/test_python.sh ${OUT}/absent/bin/python -c "print(1)"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 77 OR NOT out MATCHES "SKIPPED: .*Run tools/test.sh")
  message(FATAL_ERROR "a missing venv must skip naming tools/test.sh; rc=${rc}\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LATENTSERVE_NO_PYPI=1 bash ${SRC}/tools/python_env.sh ${OUT}/venv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${OUT}/venv/bin/python)
  message(FATAL_ERROR "python_env.sh could not make a venv: rc=${rc}\n${out}${err}")
endif()
execute_process(COMMAND bash ${SRC}/tools/test_python.sh ${OUT}/venv/bin/python -c "import pytest; print('ran')"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "ran")
  message(FATAL_ERROR "the fresh venv does not run pytest: rc=${rc}\n${out}${err}")
endif()
file(REMOVE_RECURSE ${OUT})
