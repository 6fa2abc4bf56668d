# Host ring communicator and the fault-injecting communicator (issue 3).
dpt_add_test(collectives_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/collectives_test.cpp LABELS "")
