# `floorline materialize`: copies of zoo models with generated weights, and the one-line errors.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

run(0 ${FLOORLINE} materialize ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx ${SOURCE_DIR}/models/zoo/resnet18.onnx
    --out ${WORK_DIR}/copies)
if(NOT out MATCHES "squeezenet1_1.onnx: 28 tensor\\(s\\) generated, 0 copied" OR NOT out MATCHES "resnet18.onnx: ")
  message(FATAL_ERROR "materialize:\n${out}")
endif()
file(SIZE ${WORK_DIR}/copies/resnet18.onnx.data bytes)
if(bytes LESS 46000000)  # 11.7 M parameters in f32
  message(FATAL_ERROR "resnet18.onnx.data is only ${bytes} bytes")
endif()
# The copy is the same model for Floorline: same layers, FLOPs and bytes (the last column, the
# processing time, left out).
run(0 ${FLOORLINE} layers ${SOURCE_DIR}/models/zoo/resnet18.onnx --format csv)
string(REGEX REPLACE ",[0-9.]+\n" "\n" original "${out}")
run(0 ${FLOORLINE} layers ${WORK_DIR}/copies/resnet18.onnx --format csv)
string(REGEX REPLACE ",[0-9.]+\n" "\n" out "${out}")
if(NOT out STREQUAL original)
  message(FATAL_ERROR "the copy's layers differ from the model's")
endif()
# A complete model: nothing to materialize, exit 1, one line naming the file.
run(1 ${FLOORLINE} materialize ${WORK_DIR}/copies/resnet18.onnx --out ${WORK_DIR}/again)
if(NOT err MATCHES "copies/resnet18.onnx: nothing to materialize")
  message(FATAL_ERROR "materialize of a complete model:\n${err}")
endif()
# A folder with no model in it is a usage error, as for every command that takes models.
file(MAKE_DIRECTORY ${WORK_DIR}/empty)
run(2 ${FLOORLINE} materialize ${WORK_DIR}/empty --out ${WORK_DIR}/none)
if(NOT err MATCHES "empty: no .onnx file in this folder")
  message(FATAL_ERROR "materialize of an empty folder:\n${err}")
endif()
