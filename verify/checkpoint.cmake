# safetensors format and state-dict checkpoints (issue 2, "Checkpoints").
dpt_add_test(safetensors_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_test.cpp)
dpt_add_test(checkpoint_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_test.cpp)
# Saving and loading tensors on CUDA devices through Backend::copy (needs a GPU; skips without one).
if(TARGET dptwin_cuda)
  dpt_add_test(checkpoint_cuda_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_cuda_test.cpp LIBS dptwin_cuda
               LABELS gpu)
endif()
