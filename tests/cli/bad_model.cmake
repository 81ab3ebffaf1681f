# A zoo holding one garbage file and two good models: the good ones are processed, the summary
# names the bad file, and the exit status is non-zero.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${SOURCE_DIR}/models/zoo/resnet18.onnx ${SOURCE_DIR}/models/zoo/alexnet.onnx DESTINATION ${WORK_DIR})
file(WRITE ${WORK_DIR}/broken.onnx "this is not a protobuf model")
execute_process(COMMAND ${FLOORLINE} layers ${WORK_DIR} --format csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit status with a broken model, got 0")
endif()
if(NOT out MATCHES "resnet18,1," OR NOT out MATCHES "alexnet,1,")
  message(FATAL_ERROR "good models missing from the output:\n${out}")
endif()
if(NOT err MATCHES "broken.onnx: not an ONNX model")
  message(FATAL_ERROR "error does not name the broken file:\n${err}")
endif()
