# Numeric engine: gradient checks, model construction and initialisation, the
# trainer. The step benchmark is an executable (bench_step), not a test.
dpt_add_test(gradcheck_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/gradcheck_test.cpp)
dpt_add_test(model_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cpp)
dpt_add_test(optim_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/optim_test.cpp)
dpt_add_test(trainer_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/trainer_test.cpp)
# Benchmark, run by hand (see the README): dptwin vs PyTorch, one training step.
add_executable(bench_step ${CMAKE_CURRENT_LIST_DIR}/bench_step.cpp)
target_link_libraries(bench_step PRIVATE dptwin_engine dpt_warnings)
target_compile_definitions(bench_step PRIVATE DPT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
dpt_add_test(cli_train_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/cli_train_test.cpp)
add_dependencies(cli_train_test dptwin)
dpt_add_test(host_kernels_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_kernels_test.cpp)
