# Tests of the twin's backend, step report, predictions and lesson (helper h4b).
if(TARGET dptwin_sim)
  dpt_add_test(step_report_test SOURCES step_report_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_backend_test SOURCES sim_backend_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_predict_test SOURCES sim_predict_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_vs_host_test SOURCES sim_vs_host_test.cpp LIBS dptwin_sim)
endif()
