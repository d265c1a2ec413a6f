// Decodes a pod list captured from a real kube-apiserver (bench/decode.sh makes one) and reports
// pods/s and peak memory. The baseline for later work on the informer's decode path.
//
//   muster_decode_bench PODLIST.json [--repeat N]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "proto/codec.h"
#include "rapidjson/document.h"

namespace {
long peakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: muster_decode_bench PODLIST.json [--repeat N]\n";
    return 2;
  }
  int repeat = 20;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::stoi(argv[i + 1]);
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const long rss_before = peakRssKiB();

  size_t pods = 0, errors = 0;
  std::vector<double> seconds;
  std::vector<muster::proto::Pod> decoded;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("items") || !doc["items"].IsArray()) {
      std::cerr << "not a list\n";
      return 1;
    }
    decoded.clear();
    decoded.reserve(doc["items"].Size());
    for (const auto& item : doc["items"].GetArray()) {
      muster::proto::Pod pod;
      if (muster::proto::decode(item, &pod).ok()) decoded.push_back(std::move(pod));
      else ++errors;
    }
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    pods = decoded.size();
  }
  std::sort(seconds.begin(), seconds.end());
  double median = seconds[seconds.size() / 2];
  std::printf("{\"input_bytes\":%zu,\"pods\":%zu,\"decode_errors\":%zu,\"repeat\":%d,"
              "\"median_seconds\":%.6f,\"pods_per_second\":%.0f,\"mib_per_second\":%.1f,"
              "\"peak_rss_mib\":%.1f,\"rss_before_decode_mib\":%.1f}\n",
              text.size(), pods, errors, repeat, median, pods / median,
              text.size() / median / (1024.0 * 1024.0), peakRssKiB() / 1024.0,
              rss_before / 1024.0);
  return errors == 0 ? 0 : 1;
}
