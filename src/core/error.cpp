#include "anvil/error.h"

namespace anvil::detail {

void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(cat("internal error: ", msg.empty() ? "" : msg + " ", "(", cond, " failed at ", file, ":", line,
                  "); please report this as an anvil bug"));
}

}  // namespace anvil::detail
