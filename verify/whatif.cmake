# Tests of the model library, cost-only layers, scenarios, sweeps, plans and reports (issue 6).
dpt_add_test(cost_layer_test SOURCES cost_layer_test.cpp)
if(TARGET dptwin_scenarios)
  dpt_add_test(scenario_test SOURCES scenario_test.cpp LIBS dptwin_scenarios)
  dpt_add_test(report_test SOURCES report_test.cpp LIBS dptwin_scenarios)
endif()
