# Numeric engine: gradient checks, model construction and initialisation, the
# trainer. The step benchmark is an executable (bench_step), not a test.
dpt_add_test(gradcheck_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/gradcheck_test.cpp)
dpt_add_test(model_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_test.cpp)
dpt_add_test(optim_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/optim_test.cpp)
dpt_add_test(trainer_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/trainer_test.cpp)
