# Tests of the twin's backend, step report, predictions and lesson (helper h4b).
if(TARGET dptwin_sim)
  dpt_add_test(step_report_test SOURCES step_report_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_backend_test SOURCES sim_backend_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_predict_test SOURCES sim_predict_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_vs_host_test SOURCES sim_vs_host_test.cpp LIBS dptwin_sim SERIAL)
endif()
if(TARGET dptwin_scenarios)
  dpt_add_test(lesson_test SOURCES lesson_test.cpp LIBS dptwin_scenarios)
  # Prints its figures; not a pass/fail test.
  add_executable(bench_sim_scale_ddp bench_sim_scale_ddp.cpp)
  target_link_libraries(bench_sim_scale_ddp PRIVATE dptwin_scenarios dpt_warnings)
  target_compile_definitions(bench_sim_scale_ddp PRIVATE DPT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
