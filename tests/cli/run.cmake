# Shared by the CLI test scripts: run(EXPECT_RC COMMAND...) runs a command, fails the test with its
# output unless it exits with EXPECT_RC, and leaves its stdout in `out` and stderr in `err`.
function(run expect_rc)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "expected exit ${expect_rc}, got ${rc}: ${ARGN}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()
