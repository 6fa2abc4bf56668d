# The twin's hardware model, platform and collectives (helper h4a).
if(TARGET dptwin_sim)
  dpt_add_test(hardware_test SOURCES hardware_test.cpp LIBS dptwin_sim)
  dpt_add_test(sim_collectives_test SOURCES sim_collectives_test.cpp LIBS dptwin_sim)
  # Benchmark, not a test: prints simulator wall time and peak RSS (see README).
  add_executable(bench_sim_scale bench_sim_scale.cpp)
  target_link_libraries(bench_sim_scale PRIVATE dptwin_sim dpt_warnings)
  target_compile_definitions(bench_sim_scale PRIVATE DPT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
