# Tests of the model library, cost-only layers, scenarios, sweeps, plans, reports
# and the what-if commands (issue 6).
dpt_add_test(cost_layer_test SOURCES cost_layer_test.cpp)
if(TARGET dptwin_scenarios)
  dpt_add_test(scenario_test SOURCES scenario_test.cpp LIBS dptwin_scenarios)
  dpt_add_test(report_test SOURCES report_test.cpp LIBS dptwin_scenarios)
  # The command-line tests run the dptwin executable itself.
  foreach(t cli_errors_test cli_output_test bench_sim_cli_test)
    dpt_add_test(${t} SOURCES ${t}.cpp)
    target_compile_definitions(${t} PRIVATE DPTWIN_EXE="$<TARGET_FILE:dptwin>")
    add_dependencies(${t} dptwin)
  endforeach()
endif()
# The HTML report opened in headless Chromium (skipped with the reason when chromium is missing).
add_test(NAME report_browser_test
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report_browser_test.sh $<TARGET_FILE:dptwin>
                 ${CMAKE_CURRENT_BINARY_DIR}/report_browser)
set_tests_properties(report_browser_test PROPERTIES LABELS "browser" SKIP_RETURN_CODE 77 TIMEOUT 300)
