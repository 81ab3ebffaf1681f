# `floorline analyze` on a real benchmark database: every format, for every model; the HTML page
# rendered in a real headless browser (Debian's chromium) with its charts naming the models; the
# DOT graph rendered by Graphviz.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(DB ${WORK_DIR}/a.db)
set(MODELS ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx ${SOURCE_DIR}/models/zoo/resnet18.onnx)

include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

run(0 ${FLOORLINE} bench ${MODELS} --db ${DB} --batch 1,2 --min-time 0.001 --repetitions 1 --max-impls 1)

# Table: the summary names both models at both batch sizes, with the bounds' columns.
run(0 ${FLOORLINE} analyze ${MODELS} --db ${DB} --batch 1,2)
foreach(want "S_us" "P_us" "R_us" "squeezenet1_1" "resnet18" "roofline peaks" "throughput \\(MLPerf scenarios\\)"
             "b2_per_s")
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "analyze table lacks '${want}':\n${out}")
  endif()
endforeach()

# JSON: every model × batch, S ≥ P > 0, R present (the bench calibrated the peaks), layers listed.
run(0 ${FLOORLINE} analyze ${MODELS} --db ${DB} --batch 1,2 --format json --out ${WORK_DIR}/r.json)
file(READ ${WORK_DIR}/r.json json)
string(JSON n LENGTH "${json}" models)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "analyze json: expected 4 model entries, got ${n}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" models ${i} model)
  string(JSON S GET "${json}" models ${i} S_us)
  string(JSON P GET "${json}" models ${i} P_us)
  string(JSON R GET "${json}" models ${i} R_us)
  string(JSON layers LENGTH "${json}" models ${i} layers)
  if(S LESS_EQUAL 0 OR P LESS_EQUAL 0 OR S LESS P OR R STREQUAL "null" OR layers LESS 10)
    message(FATAL_ERROR "analyze json: ${name}: S=${S} P=${P} R=${R} layers=${layers}")
  endif()
endforeach()

# CSV: a header and one row per model × batch; --layers: one row per layer.
run(0 ${FLOORLINE} analyze ${MODELS} --db ${DB} --batch 1,2 --format csv)
string(REGEX MATCHALL "\n(squeezenet1_1|resnet18)," rows "${out}")
list(LENGTH rows nrows)
if(NOT nrows EQUAL 4)
  message(FATAL_ERROR "analyze csv: expected 4 rows:\n${out}")
endif()

# HTML, rendered by chromium: five charts (or the note that replaces the batch chart), model names in them.
run(0 ${FLOORLINE} analyze ${MODELS} --db ${DB} --batch 1,2 --format html --out ${WORK_DIR}/r.html)
rendered_dom(${WORK_DIR}/r.html)
foreach(id chart-bounds chart-batch chart-kinds chart-roofline chart-critical-path)
  string(REGEX MATCH "<svg[^>]*id=\"${id}\".*</svg>" svg "${dom}")
  string(FIND "${svg}" "</svg>" end)
  if(svg STREQUAL "")
    message(FATAL_ERROR "the rendered report has no ${id} chart")
  endif()
  string(SUBSTRING "${svg}" 0 ${end} svg)
  if(NOT id STREQUAL "chart-roofline" AND (NOT svg MATCHES "squeezenet1_1" OR NOT svg MATCHES "resnet18"))
    message(FATAL_ERROR "the ${id} chart does not name both models")
  endif()
endforeach()

# The throughput view: one panel per model (both batches analyzed), with its axes.
foreach(model squeezenet1_1 resnet18)
  string(REGEX MATCH "<svg[^>]*id=\"chart-throughput-${model}-f32\".*</svg>" svg "${dom}")
  string(FIND "${svg}" "</svg>" end)
  if(svg STREQUAL "")
    message(FATAL_ERROR "the rendered report has no throughput panel for ${model}")
  endif()
  string(SUBSTRING "${svg}" 0 ${end} svg)
  if(NOT svg MATCHES "inferences/s" OR NOT svg MATCHES "batch size")
    message(FATAL_ERROR "the ${model} throughput panel lacks its axis titles")
  endif()
endforeach()
# The roofline legend: no colour twice.
string(REGEX MATCH "id=\"legend-roofline\"[^<]*(<span[^>]*>[^<]*</span>[^<]*)+" legend "${dom}")
string(REGEX MATCHALL "color: ?#[0-9a-f]+" colors "${legend}")
list(LENGTH colors ncolors)
set(unique ${colors})
list(REMOVE_DUPLICATES unique)
list(LENGTH unique nunique)
if(ncolors LESS 3 OR NOT ncolors EQUAL nunique)
  message(FATAL_ERROR "roofline legend colours repeat or are missing (${ncolors} colours, ${nunique} distinct): ${legend}")
endif()

# DOT: one graph per model × batch, critical path in red, and Graphviz renders it.
run(0 ${FLOORLINE} analyze ${MODELS} --db ${DB} --format dot --out ${WORK_DIR}/r.dot)
file(READ ${WORK_DIR}/r.dot dot)
if(NOT dot MATCHES "digraph \"resnet18_b1\"" OR NOT dot MATCHES "color=red")
  message(FATAL_ERROR "analyze dot lacks the resnet18 graph or its critical path")
endif()
find_program(DOT_EXE dot REQUIRED)
run(0 ${DOT_EXE} -Tsvg ${WORK_DIR}/r.dot -o ${WORK_DIR}/r.svg)

# A model with no measurement at all: a clear error naming the database (which exists: analyze
# opens read-only and creates nothing, tests/cli/hostile.cmake).
run(0 ${FLOORLINE} layers ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx --db ${WORK_DIR}/empty.db)
run(2 ${FLOORLINE} analyze ${SOURCE_DIR}/models/zoo/vit_b_16.onnx --db ${WORK_DIR}/empty.db)
if(NOT err MATCHES "empty.db: no measurement")
  message(FATAL_ERROR "analyze with no measurements: unexpected error:\n${err}")
endif()

# Every write is checked, every format: /dev/full fails at the flush with a one-line reason; --out
# naming an input (the model, the database) is refused and leaves it byte-identical.
if(EXISTS /dev/full)
  foreach(format table json csv html dot)
    run(1 ${FLOORLINE} analyze ${MODELS} --db ${DB} --format ${format} --out /dev/full)
    if(NOT err MATCHES "floorline analyze: cannot write /dev/full: No space left on device\n$")
      message(FATAL_ERROR "analyze --format ${format} --out /dev/full:\n${err}")
    endif()
  endforeach()
endif()
file(COPY ${SOURCE_DIR}/models/zoo/squeezenet1_1.onnx DESTINATION ${WORK_DIR}/in)
file(SHA256 ${WORK_DIR}/in/squeezenet1_1.onnx sha)
file(SHA256 ${DB} db_sha)
run(2 ${FLOORLINE} analyze ${WORK_DIR}/in/squeezenet1_1.onnx --db ${DB} --out ${WORK_DIR}/in/squeezenet1_1.onnx)
if(NOT err STREQUAL "floorline analyze: ${WORK_DIR}/in/squeezenet1_1.onnx: is also an input (${WORK_DIR}/in/squeezenet1_1.onnx); choose another --out\n")
  message(FATAL_ERROR "analyze --out MODEL:\n${err}")
endif()
run(2 ${FLOORLINE} analyze ${WORK_DIR}/in/squeezenet1_1.onnx --db ${DB} --format json --out ${DB})
file(SHA256 ${WORK_DIR}/in/squeezenet1_1.onnx sha_after)
file(SHA256 ${DB} db_sha_after)
if(NOT sha STREQUAL sha_after OR NOT db_sha STREQUAL db_sha_after)
  message(FATAL_ERROR "analyze --out overwrote an input")
endif()
