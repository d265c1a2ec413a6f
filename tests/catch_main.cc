// The one Catch2 main every test binary links (muster_catch_main in tests/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
