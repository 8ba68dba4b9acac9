// Processes of a measurement: CPU time.

#include <sys/resource.h>

#include "alkaid/measure/clock.h"

namespace alkaid::measure {

int64_t ProcessCpuNs() {
  rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  auto ns = [](const timeval& tv) { return int64_t{tv.tv_sec} * 1000000000 + tv.tv_usec * 1000; };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

}  // namespace alkaid::measure
