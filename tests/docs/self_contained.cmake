# The repository stands alone: no tracked file points to the design notes that lived outside it
# (CHECK=outside), and no tracked file is named after an issue number (CHECK=issue_names).
# Run with -DSOURCE_DIR=<repository root> -DCHECK=outside|issue_names. Outside a git checkout (a
# source tarball) there is no list of tracked files: the test says so and is reported skipped.
find_program(GIT git)
if(NOT GIT OR NOT EXISTS "${SOURCE_DIR}/.git")
  message("[  SKIPPED ] not a git checkout: no list of tracked files")
  return()
endif()

if(CHECK STREQUAL "outside")
  # The pattern is split so that this file does not match it.
  set(pattern "shared/(DESIGN|STYLE)[.]md")
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} grep -n -E "${pattern}"
                  OUTPUT_VARIABLE hits RESULT_VARIABLE rc)
  # git grep: 0 found, 1 none found, anything else an error.
  if(rc EQUAL 0)
    message(FATAL_ERROR "tracked files point outside the repository (use docs/ARCHITECTURE.md or "
                        "docs/MEASUREMENT.md):\n${hits}")
  elseif(NOT rc EQUAL 1)
    message(FATAL_ERROR "git grep failed (${rc})")
  endif()
elseif(CHECK STREQUAL "issue_names")
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} ls-files OUTPUT_VARIABLE files RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR files STREQUAL "")
    message(FATAL_ERROR "git ls-files failed (${rc})")
  endif()
  string(REPLACE "\n" ";" files "${files}")
  set(bad "")
  foreach(f IN LISTS files)
    get_filename_component(name "${f}" NAME)
    string(TOLOWER "${name}" lower)
    if(lower MATCHES "issue[0-9]")
      string(APPEND bad "  ${f}\n")
    endif()
  endforeach()
  if(NOT bad STREQUAL "")
    message(FATAL_ERROR "files named after an issue number (name them by what they hold):\n${bad}")
  endif()
else()
  message(FATAL_ERROR "CHECK must be outside or issue_names")
endif()
