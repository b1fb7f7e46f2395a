// The subcommands of the `vramcache` command that read a trace (report, simulate) and the report
// written after a run (commands.cc). main.cc dispatches to them; they print or write files and
// return an exit code, never exit themselves.
#pragma once

#include <cstdint>
#include <string>

#include "profiler/analysis.h"

namespace vc {

// One budget's figures as a JSON object (vramcache simulate -o FILE.json).
std::string budget_json(const Analysis &a, const BudgetResult &r);

// The subcommands. Exit codes: 0 done, 1 unreadable trace (one line says why), 2 usage error.
int report_main(int argc, char **argv);
int simulate_main(int argc, char **argv);
// `vramcache profile` and `run --report` after the run: writes the summary and the report next to
// the trace. `residency_path`: the run's residency file, if any (its budget is `budget`); a bad one
// is left out of the report with a message, and the exit code is 1.
int report_command(const std::string &trace_path, const std::string &html_path, const std::string &summary_path,
                   uint64_t budget, uint64_t page_size = 0, const LinkModel &link = LinkModel{},
                   const std::string &residency_path = "");

}  // namespace vc
