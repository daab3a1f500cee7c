// LaunchedGroupSize: how many ranks a launcher started this process with, read from the
// environment it sets (Open MPI's mpirun: OMPI_COMM_WORLD_SIZE; MPICH and Intel MPI's Hydra:
// PMI_SIZE; Slurm's srun: SLURM_NTASKS with a PMI), before MPI is brought up. 1 when no launcher
// says otherwise.
#pragma once

#include <cstdlib>
#include <string>

namespace ls::dist {

inline int LaunchedGroupSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && *v) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

}  // namespace ls::dist
