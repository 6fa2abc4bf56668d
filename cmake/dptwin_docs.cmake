# Runs the built dptwin to write its completion scripts and man page into OUT_DIR:
#   cmake -DDPTWIN=path/to/dptwin -DSCENARIOS_DIR=... -DOUT_DIR=... -P dptwin_docs.cmake
file(MAKE_DIRECTORY "${OUT_DIR}")
set(ENV{DPTWIN_SCENARIOS_DIR} "${SCENARIOS_DIR}")
# Sanitizer builds run the binary here too: a leak report at exit is not a docs failure.
set(ENV{ASAN_OPTIONS} "detect_leaks=0")
function(dptwin_write file)
  execute_process(COMMAND "${DPTWIN}" ${ARGN} OUTPUT_FILE "${OUT_DIR}/${file}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dptwin ${ARGN} failed (${rc})")
  endif()
endfunction()
dptwin_write(dptwin.bash completion bash)
dptwin_write(_dptwin completion zsh)
dptwin_write(dptwin.1 man)
