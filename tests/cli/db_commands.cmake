# `floorline layers --db` and `floorline db info|query|import|merge` on real zoo models.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(DB ${WORK_DIR}/results.db)

include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

run(0 ${FLOORLINE} layers ${SOURCE_DIR}/models/zoo/resnet18.onnx ${SOURCE_DIR}/models/zoo/alexnet.onnx
    --batch 1,4 --db ${DB} --format csv)
if(NOT err MATCHES "recorded 2 model\\(s\\) at 2 batch size\\(s\\)")
  message(FATAL_ERROR "layers --db did not report recording:\n${err}")
endif()

run(0 ${FLOORLINE} db info ${DB} --format json)
string(JSON models GET "${out}" counts 0 models)
string(JSON version GET "${out}" schema_version)
if(NOT models EQUAL 2 OR NOT version EQUAL 12)
  message(FATAL_ERROR "db info: expected 2 models at schema 12:\n${out}")
endif()

# A file written by schema 3 (tests/fixtures/README.md) is upgraded by `db migrate` (db info, a
# read command, refuses it: tests/cli/hostile.cmake), and keeps its replay and its framework
# latency apart.
file(COPY ${SOURCE_DIR}/tests/fixtures/schema_v3.db DESTINATION ${WORK_DIR})
run(0 ${FLOORLINE} db migrate ${WORK_DIR}/schema_v3.db)
if(NOT out MATCHES "upgraded from schema 3 to 12")
  message(FATAL_ERROR "db migrate on the schema-3 fixture:\n${out}")
endif()
run(0 ${FLOORLINE} db info ${WORK_DIR}/schema_v3.db --format json)
string(JSON version GET "${out}" schema_version)
string(JSON replays GET "${out}" counts 0 replays)
string(JSON frameworks GET "${out}" counts 0 framework_latencies)
string(JSON libraries GET "${out}" systems 0 libraries)
if(NOT version EQUAL 12 OR NOT replays EQUAL 1 OR NOT frameworks EQUAL 1
   OR NOT libraries MATCHES "\"onednn\":\"2\.")
  message(FATAL_ERROR "db info on the schema-3 fixture:\n${out}")
endif()

# resnet18 at batch 1: its first conv, 64 filters of 3x7x7 on 224x224, stride 2, pads 3:
# 2*3*7*7*64*112*112 = 236027904 FLOPs plus 64*112*112 bias adds = 236830720.
run(0 ${FLOORLINE} db query ${DB} --model resnet18 --batch 1 --format csv)
if(NOT out MATCHES "16,/conv1/Conv,compute,Conv,\"Conv\\|x=1x3x224x224\\|w=64x3x7x7\\|bias\\|pads=3,3,3,3\\|strides=2,2\\|dil=1,1\\|group=1\\|f32\",236830720,")
  message(FATAL_ERROR "db query --model: first conv missing or wrong:\n${out}")
endif()
run(0 ${FLOORLINE} db query ${DB} "SELECT count(*) AS n FROM models" --format csv)
if(NOT out STREQUAL "n\n2\n")
  message(FATAL_ERROR "raw SQL: unexpected output:\n${out}")
endif()
# Raw SQL runs on a read-only connection.
run(1 ${FLOORLINE} db query ${DB} "DELETE FROM models")
if(NOT err MATCHES "read-only")
  message(FATAL_ERROR "a write through db query was not refused as read-only:\n${err}")
endif()
run(1 ${FLOORLINE} db query ${DB} --model nosuchmodel)
run(1 ${FLOORLINE} db info ${WORK_DIR}/missing.db)
if(NOT err MATCHES "missing.db: no such database")
  message(FATAL_ERROR "db info on a missing file:\n${err}")
endif()

file(WRITE ${WORK_DIR}/pytorch.csv "model_name,runtime,runtime_version,device,batch,dtype,median_ms\nresnet18,pytorch,1.13.1,cpu,1,f32,41.5\n")
run(0 ${FLOORLINE} db import ${DB} --framework ${WORK_DIR}/pytorch.csv)
run(0 ${FLOORLINE} db query ${DB} --framework --format csv)
if(NOT out MATCHES "resnet18,pytorch,1.13.1,cpu,1,f32,,0,41500.0")
  message(FATAL_ERROR "db query --framework:\n${out}")
endif()

# The reference runtime's per-node profiles (real ONNX Runtime profiles of two zoo models,
# tests/fixtures/ort), mapped to the models' layers: resnet18's 25 runtime nodes and bert's.
run(0 ${FLOORLINE} db import ${DB} --framework-profile ${SOURCE_DIR}/tests/fixtures/ort/profiles.json)
if(NOT out MATCHES "2 profile\\(s\\), [0-9]+ runtime nodes stored")
  message(FATAL_ERROR "db import --framework-profile:\n${out}")
endif()
db_value(${DB} "SELECT count(*) FROM framework_layer_times WHERE model_name = 'resnet18'")
if(NOT value EQUAL 25)
  message(FATAL_ERROR "resnet18: expected 25 runtime nodes, got ${value}")
endif()
db_value(${DB} "SELECT layers FROM framework_layer_times WHERE model_name = 'resnet18' AND node_order = 0")
if(NOT value STREQUAL "[\"\"/conv1/Conv\"\",\"\"/relu/Relu\"\"]")
  message(FATAL_ERROR "resnet18's first runtime node: ${value}")
endif()

# Merging the database into a new one twice: the second merge adds nothing.
run(0 ${FLOORLINE} db merge ${WORK_DIR}/merged.db ${DB} ${DB})
if(NOT out MATCHES "\\+0 systems, \\+0 runs, \\+0 configs, \\+0 cases, \\+0 measurements")
  message(FATAL_ERROR "second merge of the same input added rows:\n${out}")
endif()
set(count_sql "SELECT (SELECT count(*) FROM models) || '/' || (SELECT count(*) FROM model_layers) || '/' || (SELECT count(*) FROM framework_latencies) AS n")
run(0 ${FLOORLINE} db query ${WORK_DIR}/merged.db "${count_sql}" --format csv)
set(merged "${out}")
run(0 ${FLOORLINE} db query ${DB} "${count_sql}" --format csv)
if(NOT merged STREQUAL out OR NOT out MATCHES "^n\n2/[0-9]+/1\n$")
  message(FATAL_ERROR "merged copy differs from its input: ${merged} vs ${out}")
endif()
