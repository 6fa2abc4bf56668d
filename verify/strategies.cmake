# Batch split, DataParallel and DDP properties (issue 3).
dpt_add_test(split_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/split_test.cpp LABELS "")
dpt_add_test(split_oracle_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/split_oracle_test.cpp LABELS oracle)
dpt_add_test(strategies_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/strategies_test.cpp LABELS "")
dpt_add_test(ddp_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/ddp_test.cpp LABELS "")
dpt_add_test(cli_split_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cli_split_test.cpp LABELS "")
add_dependencies(cli_split_test dptwin)
