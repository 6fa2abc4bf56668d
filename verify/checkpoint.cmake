# safetensors format and state-dict checkpoints (issue 2, "Checkpoints").
dpt_add_test(safetensors_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/safetensors_test.cpp)
dpt_add_test(checkpoint_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/checkpoint_test.cpp)
