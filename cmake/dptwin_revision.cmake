# Writes the git revision of the source tree into OUT as a C++ string literal,
# rewriting OUT only when the revision changed (so a build after no commit
# recompiles nothing). Run at every build by the dptwin_revision target:
#   cmake -DSOURCE_DIR=... -DOUT=... -P dptwin_revision.cmake
# Outside a git checkout (a release tarball) the revision is "unknown".
set(revision "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" describe --always --abbrev=12 --dirty --exclude=*
                  OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(rc EQUAL 0 AND described)
    set(revision "${described}")
  endif()
endif()
set(content "\"${revision}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE "${OUT}" "${content}")
endif()
