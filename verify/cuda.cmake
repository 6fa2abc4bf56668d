# The CUDA backend (issue 5). The rendezvous is plain C++ and always tested; the
# CUDA tests exist when dptwin_cuda is built. Tests that need a GPU carry the
# `gpu` label and skip with the runtime's reason where none is present; the error
# paths (check macros, no-device errors) run everywhere.
dpt_add_test(rendezvous_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/rendezvous_test.cpp LIBS dptwin_rendezvous)
if(TARGET dptwin_cuda)
  dpt_add_test(cuda_nogpu_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_nogpu_test.cpp LIBS dptwin_cuda)
  dpt_add_test(cuda_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_test.cpp LIBS dptwin_cuda LABELS gpu)
endif()
# `dptwin bench --backend host`'s engine (scenarios/lib/device_bench), run here.
if(TARGET dptwin_scenarios)
  dpt_add_test(device_bench_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/device_bench_test.cpp LIBS dptwin_scenarios)
endif()
# ci/gpu-check's flags and its refusal without a GPU (runs everywhere; fast).
add_test(NAME GpuCheck.FlagsAndNoGpuRefusal
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/gpu_check_test.sh ${PROJECT_SOURCE_DIR}/ci/gpu-check)
# Measured intervals into the step report and Chrome trace (no GPU needed).
if(TARGET dptwin_scenarios AND TARGET dptwin_sim)
  dpt_add_test(measured_report_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/measured_report_test.cpp LIBS dptwin_scenarios)
endif()
# `dptwin bench --backend host|cuda` end to end through the executable.
if(TARGET dptwin)
  add_test(NAME BenchCli.HostEndToEndAndCudaRefusal
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bench_cli_test.sh $<TARGET_FILE:dptwin>)
endif()
# `dptwin calibrate --from BENCH.json`: efficiency fields from bench figures.
if(TARGET dptwin_scenarios AND TARGET dptwin_sim)
  dpt_add_test(calibrate_bench_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/calibrate_bench_test.cpp LIBS dptwin_scenarios)
endif()
