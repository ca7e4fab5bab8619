// What the runtime's tools (ppsim-run, ppsim-validate) say of a --backend
// this build lacks. Header-only: each tool is compiled with PPSIM_HAVE_CUDA
// when the CUDA backend is linked into it.
#pragma once

#include <string>

#include "schedules/status.h"

namespace ppsim::runtime {

// An Error for --backend cuda in a build without the CUDA backend.
inline Status check_backend_built(const std::string& backend) {
#ifndef PPSIM_HAVE_CUDA
  if (backend == "cuda") {
    return Error{
        "--backend cuda: this ppsim was built without CUDA (install the CUDA toolkit and build "
        "again)"};
  }
#endif
  (void)backend;
  return {};
}

}  // namespace ppsim::runtime
