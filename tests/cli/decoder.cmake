# The language-model view end to end: `floorline bench` and `analyze` with named dims on two decoders
# (tests/fixtures/outside_decoder/tp_decode.onnx, its dims bsz, seq, n_past, and the merged decoder of
# tests/fixtures/composite, whose If picks its branch by the past length), then the report in every
# form: the table's and JSON's decoder rows (phase, past tokens, tokens/s, the If's branch), and the
# HTML's chart of time per output token against the context, rendered by a real headless browser.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(DB ${WORK_DIR}/d.db)
set(TP ${SOURCE_DIR}/tests/fixtures/outside_decoder/tp_decode.onnx)
set(MERGED ${SOURCE_DIR}/tests/fixtures/composite/merged_decoder.onnx)
set(DIMS --dim seq=1 --dim n_past=16,64 --dim sequence_length=3 --dim past_sequence_length=0,5)

include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

run(0 ${FLOORLINE} bench ${TP} ${MERGED} ${DIMS} --db ${DB} --min-time 0.001 --repetitions 1 --max-impls 1)

# JSON: four scenarios, each a decoder step; the merged decoder's say which branch ran, the others
# have no such field.
run(0 ${FLOORLINE} analyze ${TP} ${MERGED} ${DIMS} --db ${DB} --format json --out ${WORK_DIR}/r.json)
file(READ ${WORK_DIR}/r.json json)
string(JSON n LENGTH "${json}" models)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "analyze json: expected 4 scenarios, got ${n}")
endif()
math(EXPR last "${n} - 1")
set(seen "")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" models ${i} model)
  string(JSON S GET "${json}" models ${i} S_us)
  string(JSON phase GET "${json}" models ${i} decoder phase)
  string(JSON past GET "${json}" models ${i} decoder past_tokens)
  string(JSON tps GET "${json}" models ${i} decoder tokens_per_s)
  string(JSON branch ERROR_VARIABLE no_branch GET "${json}" models ${i} decoder if_branch)
  if(S LESS_EQUAL 0 OR tps LESS_EQUAL 0)
    message(FATAL_ERROR "analyze json: ${name}: S=${S} tokens_per_s=${tps}")
  endif()
  if(name MATCHES "^tp_decode\\[n_past=(16|64);seq=1\\]$")
    if(NOT phase STREQUAL "decode" OR NOT past EQUAL CMAKE_MATCH_1 OR NOT no_branch)
      message(FATAL_ERROR "analyze json: ${name}: phase ${phase}, past ${past}, if_branch '${branch}'")
    endif()
  elseif(name MATCHES "^merged_decoder\\[past_sequence_length=([05]);sequence_length=3\\]$")
    if(CMAKE_MATCH_1 STREQUAL "0")
      set(want "else-branch (without the cache)")
    else()
      set(want "then-branch (with the cache)")
    endif()
    if(NOT past EQUAL CMAKE_MATCH_1 OR NOT branch STREQUAL want)
      message(FATAL_ERROR "analyze json: ${name}: past ${past}, if_branch '${branch}' (want '${want}')")
    endif()
  else()
    message(FATAL_ERROR "analyze json: an unexpected scenario ${name}")
  endif()
  list(APPEND seen ${name})
endforeach()
list(REMOVE_DUPLICATES seen)
list(LENGTH seen nseen)
if(NOT nseen EQUAL 4)
  message(FATAL_ERROR "analyze json: scenarios repeat: ${seen}")
endif()

# Table: the language-model section with its if_branch column.
run(0 ${FLOORLINE} analyze ${TP} ${MERGED} ${DIMS} --db ${DB})
foreach(want "language models" "if_branch" "then-branch \\(with the cache\\)" "tp_decode\\[n_past=64;seq=1\\]")
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "analyze table lacks '${want}':\n${out}")
  endif()
endforeach()

# HTML, rendered by chromium: the decoders' table with the branch, and the chart of time per output
# token with one panel for tp_decode (decode steps at two past lengths) and its three series.
run(0 ${FLOORLINE} analyze ${TP} ${MERGED} ${DIMS} --db ${DB} --format html --out ${WORK_DIR}/r.html)
find_program(CHROMIUM NAMES chromium chromium-browser REQUIRED)
execute_process(COMMAND ${CHROMIUM} --headless --no-sandbox --disable-gpu --disable-background-networking
                        --disable-component-update --disable-sync --no-first-run --user-data-dir=${WORK_DIR}/chromium
                        --dump-dom file://${WORK_DIR}/r.html
                RESULT_VARIABLE rc OUTPUT_VARIABLE dom ERROR_VARIABLE ignored TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "chromium failed (${rc}) to render the report")
endif()
string(REGEX MATCH "<table id=\"decoders\">.*</table>" table "${dom}")
if(NOT table MATCHES "If: then-branch \\(with the cache\\)" OR NOT table MATCHES "If: else-branch")
  message(FATAL_ERROR "the rendered decoders' table does not say which branch ran:\n${table}")
endif()
string(REGEX MATCH "<div id=\"chart-tpot\".*" chart "${dom}")
string(FIND "${chart}" "</div>" end)
string(SUBSTRING "${chart}" 0 ${end} chart)
string(REGEX MATCHALL "<svg" panels "${chart}")
list(LENGTH panels npanels)
if(NOT npanels EQUAL 1 OR NOT chart MATCHES "id=\"chart-tpot-tp_decode batch 1\"" OR NOT chart MATCHES "<title>bound S</title>"
   OR NOT chart MATCHES "16 past tokens" OR NOT chart MATCHES "64 past tokens")
  message(FATAL_ERROR "the rendered chart-tpot has ${npanels} panel(s), want tp_decode's with S at 16 and 64 past tokens:\n${chart}")
endif()
