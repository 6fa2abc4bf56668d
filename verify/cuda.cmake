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
