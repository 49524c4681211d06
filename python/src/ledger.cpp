// python/src/ledger.cpp — the transfer ledger as a context manager:
//   with anvil.ledger() as l: …
//   print(l.report())   # copies, bytes and host syncs since the `with`
#include <sstream>

#include "common.h"

namespace anvil::python {

void bind_ledger(nb::module_& m) {
  nb::class_<LedgerReport>(m, "LedgerReport", doc("LedgerReport"))
      .def("copies", &LedgerReport::copies, "src"_a, "dst"_a, doc("LedgerReport::copies"))
      .def("bytes", &LedgerReport::bytes, "src"_a, "dst"_a, doc("LedgerReport::bytes"))
      .def("host_syncs", &LedgerReport::host_syncs, "device"_a, doc("LedgerReport::host_syncs"))
      .def_prop_ro("total_copies", &LedgerReport::total_copies)
      .def_prop_ro("total_bytes", &LedgerReport::total_bytes)
      .def_prop_ro("total_syncs", &LedgerReport::total_syncs)
      .def("collective_count", &LedgerReport::collective_count, "device"_a, doc("LedgerReport::collective_count"))
      .def("collective_bytes", &LedgerReport::collective_bytes, "device"_a, doc("LedgerReport::collective_bytes"))
      .def("__str__", [](const LedgerReport& r) {
        std::ostringstream os;
        os << r;
        return os.str();
      });
  nb::class_<Ledger>(m, "ledger", "Counts copies, bytes and host syncs from its creation (or reset)")
      .def(nb::init<>())
      .def("report", &Ledger::report, doc("Ledger::report"))
      .def("reset", &Ledger::reset, doc("Ledger::reset"))
      .def("__enter__",
           [](nb::handle self) {
             nb::cast<Ledger&>(self).reset();
             return nb::borrow(self);
           })
      .def("__exit__", [](Ledger&, nb::args) { return false; });
  m.def("ledger_totals", &ledger_totals, doc("ledger_totals"));
}

}  // namespace anvil::python
