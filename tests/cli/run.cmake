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

# db_value(DB SQL): the single value SQL returns from the database DB (via `floorline db query`,
# so no sqlite3 program is needed), in `value`. Needs FLOORLINE.
function(db_value db query)
  execute_process(COMMAND ${FLOORLINE} db query ${db} "${query}" --format csv RESULT_VARIABLE rc OUTPUT_VARIABLE o
                  ERROR_VARIABLE e OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "db query ${query}: ${e}")
  endif()
  string(REGEX REPLACE "^[^\n]*\n" "" o "${o}")  # the CSV header
  string(REGEX REPLACE "^\"(.*)\"$" "\\1" o "${o}")
  set(value "${o}" PARENT_SCOPE)
endfunction()

# rendered_dom(HTML): the page HTML (a file) as Debian's headless chromium renders it, scripts run, in
# `dom`; fails the test when chromium is missing or fails. Needs WORK_DIR (chromium's profile).
function(rendered_dom html)
  find_program(CHROMIUM NAMES chromium chromium-browser REQUIRED)
  execute_process(COMMAND ${CHROMIUM} --headless --no-sandbox --disable-gpu --disable-background-networking
                          --disable-component-update --disable-sync --no-first-run
                          --user-data-dir=${WORK_DIR}/chromium --dump-dom file://${html}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE ignored TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "chromium failed (${rc}) to render ${html}")
  endif()
  set(dom "${o}" PARENT_SCOPE)
endfunction()
