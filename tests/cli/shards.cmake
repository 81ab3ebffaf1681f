# Shards without Slurm: `run --shard` and `bench --shard` split one plan (squeezenet1_1, quick
# settings) into 3 shard databases that together hold every planned case once; `db merge` of their
# folder; `db coverage` finds the merge complete, then, with one shard's file left out, names that
# shard and exits 1. Malformed --shard values are refused with exit status 2.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/shards)
set(MODEL ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx)
set(PLAN --max-impls 1)
set(BENCH --repetitions 1 --min-time 0.001 --warmup 0 --no-calibrate --quiet)
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

run(2 ${FLOORLINE} bench ${MODEL} --db ${WORK_DIR}/x.db --shard 3/3)
if(NOT err MATCHES "shard index is 0-based, from 0 to 2")
  message(FATAL_ERROR "--shard 3/3: ${err}")
endif()
run(2 ${FLOORLINE} bench ${MODEL} --db ${WORK_DIR}/x.db --shard 1of3)

run(0 ${FLOORLINE} plan ${MODEL} ${PLAN} --format json)
string(REGEX MATCH "\"summary\": {[^}]*\"cases\": ([0-9]+)" m "${out}")
set(planned ${CMAKE_MATCH_1})

# Shard 0 with `run` (no replay, no analysis for a shard), shards 1 and 2 with `bench`.
run(0 ${FLOORLINE} run ${MODEL} --max-impls 1 --repetitions 1 --min-time 0.001 --quiet --no-replay
    --db ${WORK_DIR}/shards/shard-0.db --out ${WORK_DIR}/run-out --shard 0/3)
if(NOT err MATCHES "shard 0/3: [0-9]+ of ${planned} cases, estimated" OR NOT err MATCHES "not for one shard")
  message(FATAL_ERROR "run --shard 0/3: ${err}")
endif()
foreach(i 1 2)
  run(0 ${FLOORLINE} bench ${MODEL} ${PLAN} ${BENCH} --db ${WORK_DIR}/shards/shard-${i}.db --shard ${i}/3)
  if(NOT err MATCHES "shard ${i}/3: [0-9]+ of ${planned} cases, estimated [0-9.]+ s of [0-9.]+ s in all")
    message(FATAL_ERROR "bench --shard ${i}/3: ${err}")
  endif()
endforeach()

# run's shard ran with other settings (warm-up 0.005 s, not 0) than bench's: the partition does not
# depend on them, so the three shards still hold each case exactly once.
run(0 ${FLOORLINE} db merge ${WORK_DIR}/merged.db ${WORK_DIR}/shards)
if(NOT out MATCHES "merged 3 of 3 databases")
  message(FATAL_ERROR "db merge of the folder: ${out}")
endif()
db_value(${WORK_DIR}/merged.db "SELECT count(*) FROM cases")
if(NOT value EQUAL planned)
  message(FATAL_ERROR "merged: ${value} cases, planned ${planned}")
endif()
db_value(${WORK_DIR}/merged.db "SELECT count(*) FROM measurements WHERE superseded = 0")
if(NOT value EQUAL planned)
  message(FATAL_ERROR "merged: ${value} current measurements for ${planned} planned cases")
endif()
run(0 ${FLOORLINE} db coverage ${WORK_DIR}/merged.db ${MODEL} ${PLAN})
if(NOT out MATCHES "${planned} of ${planned} planned cases have a result; 0 missing"
   AND NOT out MATCHES "${planned} of ${planned} planned cases have a result \\([^)]*\\); 0 missing")
  message(FATAL_ERROR "coverage: ${out}")
endif()

# Shard 1's file lost: a glob merge of the other two, and coverage names shard 1.
file(RENAME ${WORK_DIR}/shards/shard-1.db ${WORK_DIR}/shard-1.db.lost)
run(0 ${FLOORLINE} db merge ${WORK_DIR}/partial.db "${WORK_DIR}/shards/shard-*.db")
run(1 ${FLOORLINE} db coverage ${WORK_DIR}/partial.db ${MODEL} ${PLAN} --list)
if(NOT out MATCHES "shard 1/3: [0-9]+ of [0-9]+ cases missing: no run of this shard"
   OR NOT out MATCHES "shard 0/3: complete" OR NOT out MATCHES "shard 2/3: complete" OR NOT out MATCHES "missing onednn/")
  message(FATAL_ERROR "coverage without shard 1: ${out}")
endif()
