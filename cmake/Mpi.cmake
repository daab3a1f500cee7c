# Decides whether rank groups over MPI are built (LATENTSERVE_MPI=AUTO|ON|OFF): several
# latentserve processes launched by mpirun serving one model, MPI carrying the step plans and
# the CPU backend's expert exchange, and bootstrapping NCCL on CUDA. Sets LATENTSERVE_HAVE_MPI.
# Without MPI the binaries are single-process as before and the MPI tests report SKIPPED.
set(LATENTSERVE_HAVE_MPI OFF)
if(NOT LATENTSERVE_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    find_program(LS_MPIEXEC NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
    set(LATENTSERVE_HAVE_MPI ON)
  elseif(LATENTSERVE_MPI STREQUAL "ON")
    message(FATAL_ERROR "LATENTSERVE_MPI=ON but MPI was not found (Debian: libopenmpi-dev openmpi-bin)")
  endif()
endif()
message(STATUS "LatentServe rank groups over MPI: ${LATENTSERVE_HAVE_MPI}")
