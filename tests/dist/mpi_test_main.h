// The main() of a test binary that mpirun starts on every rank: GoogleTest, then MPI through the
// group's Communicator (its deadline set), RUN_ALL_TESTS on every rank, and MPI_Finalize after.
// The test file owns the global the communicator is published through.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "dist/communicator.h"

namespace ls::dist {

inline int RunMpiTests(int argc, char** argv, std::chrono::seconds timeout, Communicator** global) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = Communicator::Init(&argc, &argv);
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", std::string(comm.status().message()).c_str());
    return 1;
  }
  (*comm)->set_timeout(timeout);
  *global = comm->get();
  const int result = RUN_ALL_TESTS();
  *global = nullptr;
  comm->reset();  // MPI_Finalize
  return result;
}

}  // namespace ls::dist
