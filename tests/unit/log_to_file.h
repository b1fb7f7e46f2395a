// Sends the library's log to a file while it lives, so that a test can count what was logged.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "runtime/log.h"

struct LogToFile {
  char path[32] = "/tmp/vramcache-test-XXXXXX";
  int fd = mkstemp(path);
  LogToFile() { vc::log_configure(vc::log_level(), path); }
  ~LogToFile() {
    vc::log_configure(vc::log_level(), "/dev/stderr");
    close(fd);
    unlink(path);
  }
  int lines(const std::string &text) const {
    std::ifstream in(path);
    int n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
    return n;
  }
};
