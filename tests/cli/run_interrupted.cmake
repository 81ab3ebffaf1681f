# `floorline run` killed midway (SIGTERM, as `kill` sends) keeps what it measured, and the same
# command resumes: it completes, and no case is measured twice.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(OUT ${WORK_DIR}/out)
set(DB ${OUT}/floorline.db)
set(MODELS ${SOURCE_DIR}/models/zoo/resnet18.onnx ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx)
# Enough work that the kill lands during the benchmarks: calibration takes a few seconds, the
# cases far longer. Resume is what is checked: no reference runtime, and no re-timing after the
# replay (--retime-below 0), which measures chosen cases a second time by design (replay.hpp) and
# on a noisy host did so for 7 cases here.
set(ARGS run ${MODELS} --out ${OUT} --batch 1 --repetitions 3 --min-time 0.001 --max-impls 2 --no-reference
         --retime-below 0)

include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)
function(sql query)
  db_value(${DB} "${query}")
  set(value "${value}" PARENT_SCOPE)
endfunction()

# timeout(1) sends SIGTERM after KILL_AFTER seconds and exits 124.
run(124 timeout -s TERM ${KILL_AFTER} ${FLOORLINE} ${ARGS})
string(FIND "${err}" "interrupted: what was measured is kept" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the killed run did not stop between cases:\n${err}")
endif()
sql("SELECT status FROM runs")
if(NOT value STREQUAL "interrupted")
  message(FATAL_ERROR "runs after the kill: expected one interrupted run, got '${value}'")
endif()
sql("SELECT count(*) FROM measurements WHERE status = 'passed'")
set(before ${value})
if(before LESS 1)
  message(FATAL_ERROR "the killed run had measured nothing: raise KILL_AFTER")
endif()

run(0 ${FLOORLINE} ${ARGS})
string(REGEX MATCH "([0-9]+) passed, [0-9]+ skipped, [0-9]+ unsupported, [0-9]+ failed, ([0-9]+) already measured" m "${err}")
if(NOT m OR CMAKE_MATCH_2 LESS before)
  message(FATAL_ERROR "the rerun did not resume (${before} passed before the kill):\n${err}")
endif()
# No case measured twice: one passed row per case and system, and one current row per case.
sql("SELECT count(*) FROM (SELECT case_id FROM measurements WHERE status = 'passed' GROUP BY system_id, case_id HAVING count(*) > 1)")
if(NOT value EQUAL 0)
  message(FATAL_ERROR "${value} case(s) were measured twice")
endif()
sql("SELECT (SELECT count(*) FROM measurements WHERE superseded = 0) = (SELECT count(*) FROM cases)")
if(NOT value EQUAL 1)
  message(FATAL_ERROR "after the rerun not every case has exactly one current measurement")
endif()
sql("SELECT group_concat(status, ',') FROM (SELECT status FROM runs ORDER BY id)")
if(NOT value STREQUAL "interrupted,finished")
  message(FATAL_ERROR "runs: expected interrupted,finished, got ${value}")
endif()
foreach(f report.json report.html)
  if(NOT EXISTS ${OUT}/${f})
    message(FATAL_ERROR "the resumed run did not write ${f}")
  endif()
endforeach()
