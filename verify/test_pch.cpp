// The translation unit that builds the test programs' shared precompiled header
// (verify/CMakeLists.txt, dpt_test_pch); it has no code of its own.
