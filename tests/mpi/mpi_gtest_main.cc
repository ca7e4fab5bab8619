// The main of the test programs that run as one MPI job (ppsim_mpi_tests,
// ppsim_cuda_mpi_tests): MPI around GoogleTest, every test on every rank.
#include <gtest/gtest.h>

#include <cstdio>

#include "real_runtime/mpi.h"

int main(int argc, char** argv) {
  if (ppsim::Status st = ppsim::runtime::mpi_init(&argc, &argv); !st) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  // Rank 0 reports every test; the others only their failures.
  if (ppsim::runtime::mpi_rank() != 0) GTEST_FLAG_SET(brief, true);
  testing::InitGoogleTest(&argc, argv);
  const int code = RUN_ALL_TESTS();
  ppsim::runtime::mpi_finalize();
  return code;
}
