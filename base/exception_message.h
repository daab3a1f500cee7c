// ExceptionMessage: what a caught exception says, for the error that reports it (a server fault:
// an exception out of a request's handler or out of an engine step).
#pragma once

#include <exception>
#include <string>

namespace ls {

// `thrown`'s what(), or a note that it was no std::exception.
inline std::string ExceptionMessage(const std::exception_ptr& thrown) {
  try {
    if (thrown) std::rethrow_exception(thrown);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
  }
  return "an exception of unknown type";
}

}  // namespace ls
