# PyTorch oracle tests (label `oracle`): Debian's /usr/bin/python3 with torch 1.13 runs
# verify/oracle/torch_oracle.py. The binary batches the jobs of all its source files
# into one Python run (oracle_session), so it is registered as ONE ctest test
# (per-case discovery would start Python, seconds each, per case).
# A machine without torch reports the tests as skipped, with the reason.
add_library(dpt_oracle_support STATIC ${CMAKE_CURRENT_SOURCE_DIR}/oracle_support.cpp)
target_link_libraries(dpt_oracle_support PUBLIC dptwin_engine PRIVATE dpt_warnings)
target_compile_definitions(dpt_oracle_support PRIVATE DPT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                           DPT_BINARY_DIR="${PROJECT_BINARY_DIR}")

function(dpt_add_oracle_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE dpt_oracle_support dptwin_engine GTest::gtest GTest::gtest_main
                        dpt_warnings)
  target_compile_definitions(${name} PRIVATE DPT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                             DPT_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS oracle TIMEOUT 300
                       SKIP_REGULAR_EXPRESSION "PyTorch oracle unavailable")
endfunction()

# Issue 2 (engine, checkpoints) and issue 3 (torch.chunk, DDP, DataParallel checkpoint).
dpt_add_oracle_test(oracle_test ${CMAKE_CURRENT_SOURCE_DIR}/oracle_test.cpp
                    ${CMAKE_CURRENT_SOURCE_DIR}/ddp_oracle_test.cpp)
