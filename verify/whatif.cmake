# Tests of the model library, cost-only layers, scenarios, sweeps, plans and reports.
dpt_add_test(cost_layer_test SOURCES cost_layer_test.cpp)
