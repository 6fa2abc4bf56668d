# dptwin verify (issue 7): the check runner and its reporters, nccl-tests log
# parsing and calibration, and the verify command end to end (host backend, planted
# correctness bugs, faults in the twin).
if(TARGET dptwin_scenarios)
  dpt_add_test(verify_report_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/verify_report_test.cpp
               LIBS dptwin_scenarios)
  dpt_add_test(nccl_log_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/nccl_log_test.cpp LIBS dptwin_scenarios)
  add_dependencies(nccl_log_test dptwin)
  dpt_add_test(verify_cmd_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/verify_cmd_test.cpp LIBS dptwin_scenarios SERIAL)
  # The command-line tests run the dptwin executable.
  add_dependencies(verify_cmd_test dptwin)
endif()
