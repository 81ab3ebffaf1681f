# Progress where stderr is not a terminal (a log file, as under nohup or CI): plain lines, no \r and
# no escape codes, every FLOORLINE_PROGRESS_INTERVAL seconds (30 by default; short here); none at
# all with --quiet.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(MODEL ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx)
set(ARGS bench ${MODEL} --backend onednn --max-impls 1 --repetitions 2 --min-time 0.005 --no-calibrate)

execute_process(COMMAND ${CMAKE_COMMAND} -E env FLOORLINE_PROGRESS_INTERVAL=0.1
                        ${FLOORLINE} ${ARGS} --db ${WORK_DIR}/a.db
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_FILE ${WORK_DIR}/a.log)
file(READ ${WORK_DIR}/a.log log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench exited ${rc}:\n${log}")
endif()
string(ASCII 13 cr)
string(ASCII 27 esc)
string(FIND "${log}" "${cr}" at_cr)
string(FIND "${log}" "${esc}" at_esc)
if(NOT at_cr EQUAL -1 OR NOT at_esc EQUAL -1)
  message(FATAL_ERROR "the log holds a carriage return or an escape code:\n${log}")
endif()
string(REGEX MATCHALL "(^|\n)progress: [0-9]+/[0-9]+ cases done, [0-9]+m[0-9][0-9]s elapsed, ETA ([0-9]+m[0-9][0-9]s|[0-9]+h[0-9][0-9]m|\\?)\n"
       lines "${log}")
list(LENGTH lines n)
if(n LESS 2)
  message(FATAL_ERROR "expected at least 2 plain progress lines, got ${n}:\n${log}")
endif()
# The counts grow and never reach the total while something is still timed (a case is done once its
# row is written: the last one ends the visits, so no line can say every case is done; before, the
# count of visits over passes said so through the whole re-measurement phase).
set(previous -1)
foreach(line ${lines})
  string(REGEX MATCH "progress: ([0-9]+)/([0-9]+)" m "${line}")
  if(CMAKE_MATCH_1 LESS previous OR NOT CMAKE_MATCH_1 LESS CMAKE_MATCH_2)
    message(FATAL_ERROR "progress out of order or at the total while timing:\n${log}")
  endif()
  set(previous ${CMAKE_MATCH_1})
endforeach()

# --quiet: no progress, the summary still there.
execute_process(COMMAND ${CMAKE_COMMAND} -E env FLOORLINE_PROGRESS_INTERVAL=0.1
                        ${FLOORLINE} ${ARGS} --db ${WORK_DIR}/b.db --quiet
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_FILE ${WORK_DIR}/b.log)
file(READ ${WORK_DIR}/b.log log)
if(NOT rc EQUAL 0 OR log MATCHES "progress:" OR NOT log MATCHES "[0-9]+ passed")
  message(FATAL_ERROR "bench --quiet exited ${rc}, expected no progress and a summary:\n${log}")
endif()

# `run` takes --quiet too.
execute_process(COMMAND ${FLOORLINE} run --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "--quiet")
  message(FATAL_ERROR "run --help lacks --quiet:\n${out}${err}")
endif()
